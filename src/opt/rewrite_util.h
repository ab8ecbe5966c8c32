// Helpers shared by the fusion passes: who reads a value, what is constant, and bookkeeping of
// which original ONNX nodes a fused node absorbed (kept as a string-list attribute so plans keep
// it).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::opt {

/// Node attribute listing the network nodes merged into a node, itself first.
inline constexpr const char* kFusedFromAttr = "kiln_fused_from";

/// For each value, the indices of the nodes that read it (once per node).
std::vector<std::vector<int>> consumersOf(const ir::Graph& graph);

bool isGraphOutput(const ir::Graph& graph, int valueId);

/// Whether the value's only reader is one node and it is not a graph output.
bool onlyReadBy(const ir::Graph& graph, const std::vector<std::vector<int>>& consumers,
                int valueId);

/// The value's tensor when it is a constant that cannot be overridden at run time, else nullptr.
const Tensor* constantValue(const ir::Graph& graph, int valueId);

/// The single float of a one-element float32 constant, if it is one.
std::optional<float> scalarConstant(const ir::Graph& graph, int valueId);

/// Whether the value's type is known to be float32.
bool isFloat32(const ir::Graph& graph, int valueId);

/// Whether two values have the same known shape (equal known dims or equal named dims).
bool sameKnownShape(const ir::Graph& graph, int a, int b);

/// Records that `into` absorbed `absorbed` (and whatever absorbed had absorbed).
void recordFusion(ir::Node& into, const ir::Node& absorbed);

/// Adds a constant value with a name derived from base that is not yet used; returns its id.
int addConstant(ir::Graph& graph, const std::string& base, Tensor tensor);

/// Drops the nodes marked in `removed`, re-sorts, and returns how many were dropped.
int dropNodes(ir::Graph& graph, const std::vector<bool>& removed);

}  // namespace kiln::opt
