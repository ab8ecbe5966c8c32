#include "engine/executor.h"

#include <algorithm>

#include "kiln/error.h"

namespace kiln {

namespace {

void collectUnsupported(const ir::Graph& graph, const std::string& scope, std::vector<std::string>& problems) {
  for (const ir::Node& node : graph.nodes) {
    std::string domain = node.domain.empty() ? "ai.onnx" : node.domain;
    if (!ir::OpSchemaRegistry::global().find(node.domain, node.opType, node.opset)) {
      problems.push_back(scope + node.label() + ": operator " + domain + "::" + node.opType + " at opset " +
                         std::to_string(node.opset) + " is not supported");
    } else if (!cpu::KernelRegistry::global().find(node.domain, node.opType)) {
      problems.push_back(scope + node.label() + ": operator " + domain + "::" + node.opType + " has no CPU kernel");
    }
    for (const auto& [name, attr] : node.attrs) {  // control-flow bodies
      std::string inner = scope + node.label() + " attribute '" + name + "' > ";
      if (const auto* g = std::get_if<std::shared_ptr<ir::Graph>>(&attr)) collectUnsupported(**g, inner, problems);
      if (const auto* gs = std::get_if<std::vector<std::shared_ptr<ir::Graph>>>(&attr))
        for (const auto& g : *gs) collectUnsupported(*g, inner, problems);
    }
  }
}

}  // namespace

std::vector<std::string> findUnsupportedNodes(const ir::Graph& graph) {
  std::vector<std::string> problems;
  collectUnsupported(graph, "", problems);
  return problems;
}

namespace {

[[noreturn]] void throwUnsupported(const std::vector<std::string>& problems) {
  std::string message = std::to_string(problems.size()) + " unsupported node" + (problems.size() > 1 ? "s" : "") + ": ";
  for (size_t i = 0; i < problems.size(); ++i) message += (i ? "; " : "") + problems[i];
  throw Error(ErrorCode::kUnsupportedNode, message);
}

}  // namespace

std::vector<Tensor> runNode(const ir::Node& node, const ir::OpSchema& schema, const cpu::KernelFn& kernel,
                            const std::vector<const Tensor*>& inputs) {
  std::vector<ir::TypeInfo> inputTypes(inputs.size());
  std::vector<const ir::TypeInfo*> typePtrs(inputs.size(), nullptr);
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k]) continue;
    inputTypes[k] = ir::TypeInfo{inputs[k]->dtype(), ir::symShapeOf(inputs[k]->shape())};
    typePtrs[k] = &inputTypes[k];
  }
  std::vector<ir::TypeInfo> outTypes(node.outputs.size());
  ir::InferContext inferCtx(node, typePtrs, inputs, outTypes);
  schema.infer(inferCtx);

  std::vector<Tensor> outs(node.outputs.size());
  cpu::KernelContext ctx(node, inputs, outs, outTypes);
  kernel(ctx);
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    if (node.outputs[k] != ir::kNoValue && !outs[k].defined()) {
      ir::failNode(node, "kernel did not produce output " + std::to_string(k) + " (internal error)",
                   ErrorCode::kRuntimeError);
    }
  }
  return outs;
}

Executor::Executor(std::shared_ptr<const ir::Graph> graph) : graph_(std::move(graph)) {
  auto problems = findUnsupportedNodes(*graph_);
  if (!problems.empty()) throwUnsupported(problems);

  std::vector<int> lastUse(graph_->values.size(), -1);
  for (size_t i = 0; i < graph_->nodes.size(); ++i)
    for (int id : graph_->nodes[i].inputs)
      if (id != ir::kNoValue) lastUse[id] = static_cast<int>(i);
  for (int id : graph_->outputs) lastUse[id] = static_cast<int>(graph_->nodes.size());

  for (size_t i = 0; i < graph_->nodes.size(); ++i) {
    const ir::Node& node = graph_->nodes[i];
    cpu::KernelCreateInfo info{node, {}, {}};
    for (int id : node.inputs) {
      const ir::Value* v = id == ir::kNoValue ? nullptr : &graph_->value(id);
      info.inputTypes.push_back(v ? &v->type : nullptr);
      info.constants.push_back(v && v->constant && !graph_->isGraphInput(id) ? &*v->constant : nullptr);
    }
    Step step{&node, ir::OpSchemaRegistry::global().find(node.domain, node.opType, node.opset),
              (*cpu::KernelRegistry::global().find(node.domain, node.opType))(info), {}};
    for (int id : node.inputs) {
      if (id != ir::kNoValue && lastUse[id] == static_cast<int>(i) && !graph_->value(id).constant &&
          std::find(step.release.begin(), step.release.end(), id) == step.release.end()) {
        step.release.push_back(id);
      }
    }
    for (int id : node.outputs)  // outputs nobody reads
      if (id != ir::kNoValue && lastUse[id] == -1) step.release.push_back(id);
    steps_.push_back(std::move(step));
  }
}

std::vector<Tensor> Executor::run(const std::vector<std::pair<int, Tensor>>& inputs) const {
  const ir::Graph& g = *graph_;
  std::vector<Tensor> slots(g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].constant) slots[i] = *g.values[i].constant;
  for (const auto& [id, tensor] : inputs) slots[id] = tensor;

  for (const Step& step : steps_) {
    const ir::Node& node = *step.node;
    std::vector<const Tensor*> in;
    for (int id : node.inputs) {
      if (id != ir::kNoValue && !slots[id].defined()) {
        ir::failNode(node, "input '" + g.value(id).name + "' has no value (internal error)", ErrorCode::kRuntimeError);
      }
      in.push_back(id == ir::kNoValue ? nullptr : &slots[id]);
    }
    std::vector<Tensor> outs = runNode(node, *step.schema, step.kernel, in);
    for (size_t k = 0; k < node.outputs.size(); ++k)
      if (node.outputs[k] != ir::kNoValue) slots[node.outputs[k]] = std::move(outs[k]);
    for (int id : step.release) slots[id] = Tensor();
  }
  std::vector<Tensor> results;
  for (int id : g.outputs) results.push_back(slots[id]);
  return results;
}

}  // namespace kiln
