// What the builder needs to time a layer's kernels (BF16 against FP32, precision_timing.cpp;
// tactics, tactics.cpp): the graph at a profile's opt shapes, the node's creation info, inputs
// of those shapes filled with deterministic data, and the median of timed runs.
#pragma once
#include <optional>
#include <random>
#include <vector>

#include "backends/cpu/kernel.h"
#include "core/internal_api.h"
#include "engine/plan_format.h"
#include "ir/graph.h"
#include "ir/op_schema.h"

namespace kiln::build {

/// The graph with every value's shape at the profile's opt shapes, or nullopt when inference fails.
std::optional<ir::Graph> graphAtOptShapes(const ir::Graph& graph, const plan::Profile& profile);

/// The creation info of a node of `g` (its input types and constants, no plan state).
KILN_INTERNAL_API cpu::KernelCreateInfo timingCreateInfo(const ir::Graph& g, const ir::Node& node);

/// A node's inputs at `concrete`'s shapes: the constants themselves, floats from `rng` uniform in
/// [-1, 1] for the rest (kept in `made`). Nullopt when a non-constant input is not float32 or its
/// shape is not concrete (the layer is not timed).
std::optional<std::vector<const Tensor*>> timingInputs(const ir::Graph& concrete,
                                                       const ir::Node& node,
                                                       const cpu::KernelCreateInfo& info,
                                                       std::mt19937& rng,
                                                       std::vector<Tensor>& made);

/// One kernel's runs on fixed inputs, timed. After the first run its outputs and workspace reuse
/// memory allocated and written once, as the engine's arena is: fresh pages would fault in on
/// every run, which costs as much as a small layer's compute and penalizes the kernels with more
/// scratch (ResNet-50's 56x56 Winograd layer timed 0.60 ms so, 0.29 ms in the engine).
class KernelRuns {
 public:
  /// The references must outlive this object.
  KernelRuns(const ir::Node& node, const ir::OpSchema& schema, const cpu::Kernel& kernel,
             const std::vector<const Tensor*>& inputs);
  /// Seconds of one run (the first sizes the memory: a warm-up).
  double timeOnce();

 private:
  const ir::Node& node_;
  const ir::OpSchema& schema_;
  const cpu::Kernel& kernel_;
  const std::vector<const Tensor*>& inputs_;
  bool sized_ = false;
  std::vector<cpu::OutputStorage> outputs_;
  cpu::OutputStorage workspace_;
};

/// The median of the values (sorts them).
double median(std::vector<double>& values);

}  // namespace kiln::build
