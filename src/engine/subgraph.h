// The engine's runner of control-flow bodies (If branch, Loop/Scan body): an Executor over the
// body, handed to control-flow kernels through KernelCreateInfo::subgraphs.
#pragma once
#include <memory>
#include <vector>

#include "backends/cpu/subgraph_runner.h"
#include "core/internal_api.h"
#include "engine/executor.h"

namespace kiln {

class ExecutorSubgraphRunner final : public cpu::SubgraphRunner {
 public:
  /// Prepares the kernels of every node of the subgraph; throws listing unsupported nodes.
  explicit ExecutorSubgraphRunner(std::shared_ptr<const ir::Graph> graph);

  const ir::Graph& graph() const override { return executor_.graph(); }
  std::vector<Tensor> run(const std::vector<Tensor>& inputs,
                          const std::vector<const Tensor*>& outer) const override;

 private:
  Executor executor_;
};

/// The factory every kernel the engine (or constant folding) creates is given: bodies run on an
/// Executor of their own, whose control-flow kernels get this factory again.
KILN_INTERNAL_API const cpu::SubgraphRunnerFactory& executorSubgraphRunners();

}  // namespace kiln
