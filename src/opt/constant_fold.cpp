#include <algorithm>

#include "backends/cpu/kernel.h"
#include "engine/executor.h"
#include "engine/subgraph.h"
#include "kiln/error.h"
#include "opt/passes.h"

namespace kiln::opt {

namespace {

// Shape and Size read only their input's shape, so they fold whenever that shape is static.
bool readsOnlyStaticShape(const ir::Graph& graph, const ir::Node& node) {
  if (!node.domain.empty() || (node.opType != "Shape" && node.opType != "Size") ||
      node.inputs.size() != 1)
    return false;
  const ir::TypeInfo& t = graph.value(node.inputs[0]).type;
  return t.dtype != DataType::kUndefined && t.shape && ir::concreteShape(*t.shape);
}

bool isFoldable(const ir::Graph& graph, const ir::Node& node, bool foldDequantize) {
  if (!foldDequantize && node.domain.empty() && node.opType == "DequantizeLinear") return false;
  const ir::OpSchema* schema =
      ir::OpSchemaRegistry::global().find(node.domain, node.opType, node.opset);
  if (!schema || !schema->deterministic ||
      !cpu::KernelRegistry::global().find(node.domain, node.opType)) {
    return false;
  }
  for (const auto& [name, attr] : node.attrs) {  // control flow bodies may read outer values
    if (std::holds_alternative<std::shared_ptr<ir::Graph>>(attr)) return false;
  }
  if (readsOnlyStaticShape(graph, node)) return true;
  for (int id : node.inputs) {
    if (id != ir::kNoValue && (!graph.value(id).constant || graph.isGraphInput(id))) return false;
  }
  return true;
}

// The node's input values for folding; a Shape/Size input is a storage-less tensor of its static
// shape.
std::vector<Tensor> foldingInputs(const ir::Graph& graph, const ir::Node& node) {
  std::vector<Tensor> inputs;
  for (int id : node.inputs) {
    if (id == ir::kNoValue) {
      inputs.emplace_back();
    } else if (graph.value(id).constant && !graph.isGraphInput(id)) {
      inputs.push_back(*graph.value(id).constant);
    } else {
      const ir::TypeInfo& t = graph.value(id).type;
      inputs.push_back(Tensor::wrap(t.dtype, *ir::concreteShape(*t.shape), nullptr, nullptr));
    }
  }
  return inputs;
}

// One pass in topological order; chains fold in one pass since folded outputs become constants.
int foldPass(ir::Graph& graph, bool foldDequantize) {
  std::vector<ir::Node> kept;
  int folded = 0;
  for (ir::Node& node : graph.nodes) {
    if (!isFoldable(graph, node, foldDequantize)) {
      kept.push_back(std::move(node));
      continue;
    }
    std::vector<Tensor> values = foldingInputs(graph, node);
    std::vector<const Tensor*> inputs;
    std::vector<const ir::TypeInfo*> types;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      int id = node.inputs[k];
      inputs.push_back(id == ir::kNoValue ? nullptr : &values[k]);
      types.push_back(id == ir::kNoValue ? nullptr : &graph.value(id).type);
    }
    std::vector<Tensor> outs = evaluateNode(node, inputs, types);
    const bool optionalOut = std::any_of(node.outputs.begin(), node.outputs.end(), [&](int id) {
      return id != ir::kNoValue && graph.value(id).type.isOptional;
    });
    if (optionalOut || std::any_of(outs.begin(), outs.end(),
                                   [](const Tensor& t) { return t.isSequence() || t.isNone(); })) {
      // constants are tensors: sequences and optionals stay computed at run time
      kept.push_back(std::move(node));
      continue;
    }
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

}  // namespace

std::vector<Tensor> evaluateNode(const ir::Node& node, const std::vector<const Tensor*>& inputs,
                                 const std::vector<const ir::TypeInfo*>& types) {
  const ir::OpSchema* schema =
      ir::OpSchemaRegistry::global().find(node.domain, node.opType, node.opset);
  const cpu::KernelFactory* factory = cpu::KernelRegistry::global().find(node.domain, node.opType);
  if (!schema || !factory) {
    throw Error(ErrorCode::kUnsupportedNode,
                "node '" + node.name + "' (" + node.opType + "): no kernel to evaluate it with");
  }
  cpu::KernelCreateInfo info{node, types, inputs, {}, &executorSubgraphRunners()};
  return runNode(node, *schema, (*factory)(info), inputs);
}

int foldConstants(ir::Graph& graph, bool foldDequantize) {
  // Folding can make shapes static downstream (Shape -> Gather -> Concat -> Reshape), which
  // lets more Shape nodes fold: repeat inference and folding until nothing changes.
  int total = 0;
  for (int round = 0; round < 16; ++round) {
    int folded = foldPass(graph, foldDequantize);
    if (folded == 0) break;
    total += folded;
    ir::inferShapes(graph);
  }
  return total;
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
