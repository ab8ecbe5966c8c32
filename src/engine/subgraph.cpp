#include "engine/subgraph.h"

#include "kiln/error.h"

namespace kiln {

ExecutorSubgraphRunner::ExecutorSubgraphRunner(std::shared_ptr<const ir::Graph> graph)
    : executor_(std::move(graph)) {}

std::vector<Tensor> ExecutorSubgraphRunner::run(const std::vector<Tensor>& inputs,
                                                const std::vector<const Tensor*>& outer) const {
  const ir::Graph& g = graph();
  if (inputs.size() != g.inputs.size() || outer.size() != g.outerInputs.size()) {
    throw Error(ErrorCode::kRuntimeError,
                "subgraph '" + g.name + "' takes " + std::to_string(g.inputs.size()) +
                    " inputs and " + std::to_string(g.outerInputs.size()) +
                    " outer-scope inputs, got " + std::to_string(inputs.size()) + " and " +
                    std::to_string(outer.size()) + " (internal error)");
  }
  std::vector<std::pair<int, Tensor>> bound;
  bound.reserve(inputs.size() + outer.size());
  for (size_t i = 0; i < outer.size(); ++i)
    if (g.outerInputs[i] != ir::kNoValue && outer[i])
      bound.emplace_back(g.outerInputs[i], *outer[i]);
  for (size_t i = 0; i < inputs.size(); ++i) bound.emplace_back(g.inputs[i], inputs[i]);
  return executor_.run(bound);
}

namespace {

class ExecutorSubgraphRunnerFactory final : public cpu::SubgraphRunnerFactory {
 public:
  std::shared_ptr<const cpu::SubgraphRunner> makeRunner(
      std::shared_ptr<const ir::Graph> body) const override {
    return std::make_shared<ExecutorSubgraphRunner>(std::move(body));
  }
};

}  // namespace

const cpu::SubgraphRunnerFactory& executorSubgraphRunners() {
  static const ExecutorSubgraphRunnerFactory factory;
  return factory;
}

}  // namespace kiln
