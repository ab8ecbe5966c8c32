// Activation epilogues fused after a convolution or matrix multiply: y = act(y + bias + residual),
// applied to one output row at a time while it is still in cache. The fusion passes name the
// activation by the ONNX op it replaced ("Relu", "Clip", ...), stored as node attributes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/internal_api.h"
#include "ir/graph.h"

namespace kiln::cpu {

enum class ActivationKind {
  kNone,
  kRelu,
  kClip,
  kLeakyRelu,
  kSigmoid,
  kHardSigmoid,
  kHardSwish,
  kSiLU,
  kGelu
};

struct Activation {
  ActivationKind kind = ActivationKind::kNone;
  float alpha = 0.0f;  // Clip: min; LeakyRelu/HardSigmoid: alpha
  float beta = 0.0f;   // Clip: max; HardSigmoid: beta
};

/// The activation named by an op type ("" = none), or nullopt if kiln cannot fuse it.
std::optional<ActivationKind> activationKindFromName(const std::string& name);
KILN_INTERNAL_API const char* activationName(ActivationKind kind);

/// The activation a fused node names in its "activation" / "activation_params" attributes;
/// fails naming the node if kiln has no such activation.
Activation fusedActivationOf(const ir::Node& node);

/// row[i] = act(row[i] + bias + (residual ? residual[i] : 0)) for i in [0, n).
KILN_INTERNAL_API void applyEpilogue(const Activation& act, float* row, int64_t n, float bias,
                                     const float* residual);

/// row[i] = act(row[i] + bias[i] + residual[i]); bias and residual may be null.
KILN_INTERNAL_API void applyEpilogueWithBiasRow(const Activation& act, float* row, int64_t n,
                                                const float* bias, const float* residual);

}  // namespace kiln::cpu
