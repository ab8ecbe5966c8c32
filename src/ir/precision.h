// The precision the builder chose for a layer, recorded on its node as the string attribute
// kPrecisionAttr so that kernel selection (and a plan) sees it: kernels of reduced precision
// take a node only when it names theirs; a node without it computes in its tensors' type.
#pragma once
#include <string>

#include "core/internal_api.h"
#include "ir/graph.h"

namespace kiln::ir {

inline constexpr const char* kPrecisionAttr = "kiln_precision";
inline constexpr const char* kPrecisionFp32 = "fp32";
inline constexpr const char* kPrecisionBf16 = "bf16";
inline constexpr const char* kPrecisionFp16 = "fp16";
inline constexpr const char* kPrecisionInt8 = "int8";

/// The node's kPrecisionAttr, "" when it has none.
KILN_INTERNAL_API std::string nodePrecision(const Node& node);

/// What the node computes in, as `kiln inspect` shows it: its kPrecisionAttr, else the type of
/// its first output ("fp32", "fp16", "bf16", or the type's name: "int64", "bool", ...).
KILN_INTERNAL_API std::string layerPrecision(const Graph& graph, const Node& node);

}  // namespace kiln::ir
