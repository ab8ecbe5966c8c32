// Runs a prepared graph on the CPU: per node, run-time shape inference, then its kernel.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/kernel.h"
#include "ir/graph.h"
#include "ir/op_schema.h"

namespace kiln {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// Lists every node whose op kiln cannot run (no schema for its opset, or no kernel), including
/// nodes inside control-flow bodies (named by the path to them).
/// Returns one line per node, empty when everything is supported.
std::vector<std::string> findUnsupportedNodes(const ir::Graph& graph);

/// Infers a node's output shapes from its concrete inputs, then runs its kernel.
std::vector<Tensor> runNode(const ir::Node& node, const ir::OpSchema& schema, const cpu::KernelFn& kernel,
                            const std::vector<const Tensor*>& inputs);

class Executor {
 public:
  /// Creates a kernel for every node; throws listing all unsupported nodes.
  explicit Executor(std::shared_ptr<const ir::Graph> graph);

  /// Runs with the graph inputs given by value id; returns the graph outputs in order.
  std::vector<Tensor> run(const std::vector<std::pair<int, Tensor>>& inputs) const;

  const ir::Graph& graph() const { return *graph_; }

 private:
  struct Step {
    const ir::Node* node;
    const ir::OpSchema* schema;
    cpu::KernelFn kernel;
    std::vector<int> release;  // values whose last use is this step
  };
  std::shared_ptr<const ir::Graph> graph_;
  std::vector<Step> steps_;
};

}  // namespace kiln
