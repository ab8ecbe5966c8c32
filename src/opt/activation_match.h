// Recognises an activation applied to a value, as a single op (Relu, Clip, ...) or as the
// multi-node patterns PyTorch exports (SiLU: x * Sigmoid(x); HardSwish before opset 14:
// x * HardSigmoid(x); Gelu: x * 0.5 * (1 + Erf(x / sqrt2))).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::opt {

struct ActivationMatch {
  std::string name;  // as the fused node's "activation" attribute: "Relu", "SiLU", "Gelu", ...
  std::vector<float> params;  // its "activation_params"
  std::vector<int> nodes;     // node indices the activation consists of
  int output = -1;            // the value holding the activation's result
};

/// The activation that alone reads `value`, or nullopt. `consumers` is consumersOf(graph).
std::optional<ActivationMatch> matchActivation(const ir::Graph& graph,
                                               const std::vector<std::vector<int>>& consumers,
                                               int value);

/// Folds the activation that alone reads `*value` into `fused` (its "activation" attributes and
/// fused-from names), marks the activation's nodes removed and moves `*value` to its result.
/// Returns whether there was one to fold.
bool absorbActivation(const ir::Graph& graph, const std::vector<std::vector<int>>& consumers,
                      std::vector<bool>& removed, ir::Node& fused, int* value);

}  // namespace kiln::opt
