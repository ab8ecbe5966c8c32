// Runs a control-flow body (If branch, Loop/Scan body) from inside a kernel.
#pragma once
#include <memory>
#include <vector>

#include "engine/executor.h"

namespace kiln {

class SubgraphRunner {
 public:
  /// Prepares the kernels of every node of the subgraph; throws listing unsupported nodes.
  explicit SubgraphRunner(std::shared_ptr<const ir::Graph> graph);

  const ir::Graph& graph() const { return executor_.graph(); }
  size_t numInputs() const { return graph().inputs.size(); }
  size_t numOutputs() const { return graph().outputs.size(); }

  /// Runs the subgraph: `inputs` bind its graph inputs in order, `outer` its outerInputs (the
  /// owning node's implicit inputs, in order). Returns its outputs in order.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const std::vector<const Tensor*>& outer) const;

 private:
  Executor executor_;
};

}  // namespace kiln
