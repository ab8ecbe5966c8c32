#include "backends/cpu/kernel.h"
#include "engine/executor.h"
#include "opt/passes.h"

namespace kiln::opt {

namespace {

bool isFoldable(const ir::Graph& graph, const ir::Node& node) {
  const ir::OpSchema* schema = ir::OpSchemaRegistry::global().find(node.domain, node.opType, node.opset);
  if (!schema || !schema->deterministic || !cpu::KernelRegistry::global().find(node.domain, node.opType)) {
    return false;
  }
  for (const auto& [name, attr] : node.attrs) {  // control flow bodies may read outer values
    if (std::holds_alternative<std::shared_ptr<ir::Graph>>(attr)) return false;
  }
  for (int id : node.inputs) {
    if (id != ir::kNoValue && (!graph.value(id).constant || graph.isGraphInput(id))) return false;
  }
  return true;
}

}  // namespace

int foldConstants(ir::Graph& graph) {
  std::vector<ir::Node> kept;
  int folded = 0;
  for (ir::Node& node : graph.nodes) {
    if (!isFoldable(graph, node)) {
      kept.push_back(std::move(node));
      continue;
    }
    std::vector<const Tensor*> inputs;
    for (int id : node.inputs) inputs.push_back(id == ir::kNoValue ? nullptr : &*graph.value(id).constant);
    const ir::OpSchema* schema = ir::OpSchemaRegistry::global().find(node.domain, node.opType, node.opset);
    cpu::KernelCreateInfo info{node, {}, {}};
    for (int id : node.inputs) {
      info.inputTypes.push_back(id == ir::kNoValue ? nullptr : &graph.value(id).type);
      info.constants.push_back(inputs[info.constants.size()]);
    }
    cpu::KernelFn kernel = (*cpu::KernelRegistry::global().find(node.domain, node.opType))(info);
    std::vector<Tensor> outs = runNode(node, *schema, kernel, inputs);
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      if (node.outputs[k] == ir::kNoValue) continue;
      ir::Value& v = graph.value(node.outputs[k]);
      v.type = ir::TypeInfo{outs[k].dtype(), ir::symShapeOf(outs[k].shape())};
      v.constant = std::move(outs[k]);
      v.producer = -1;
    }
    ++folded;
  }
  graph.nodes = std::move(kept);
  ir::sortTopologically(graph);
  return folded;
}

int eliminateDeadNodes(ir::Graph& graph) {
  std::vector<bool> live(graph.values.size(), false);
  for (int id : graph.outputs) live[id] = true;
  std::vector<bool> keep(graph.nodes.size(), false);
  int removed = 0;
  for (size_t i = graph.nodes.size(); i-- > 0;) {
    const ir::Node& node = graph.nodes[i];
    for (int id : node.outputs) keep[i] = keep[i] || (id != ir::kNoValue && live[id]);
    if (!keep[i]) {
      ++removed;
      continue;
    }
    for (int id : node.inputs)
      if (id != ir::kNoValue) live[id] = true;
  }
  std::vector<ir::Node> kept;
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    if (keep[i]) kept.push_back(std::move(graph.nodes[i]));
  graph.nodes = std::move(kept);
  ir::sortTopologically(graph);
  return removed;
}

}  // namespace kiln::opt
