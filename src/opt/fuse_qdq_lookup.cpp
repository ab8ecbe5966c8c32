// DQ(x) -> f1 -> ... -> fk -> Q with each f an elementwise op of the one value before it: an
// activation (Sigmoid, Tanh, HardSwish, ...; Clip with constant bounds) or Add / Sub / Mul / Div /
// Pow / Max / Min with a constant scalar, every intermediate read only by the next, per-tensor
// constant parameters ==> kiln::QLinearLookup(x, table) (ir/ops/quantized_elementwise.cpp). An
// 8-bit x takes 256 values: the table is those values sent through the nodes' own kernels when the
// model is built, so the lookup gives the bytes the chain gives. The cases that matter:
// EfficientNet's SiLU (a Sigmoid between a DQ and a Q) and BERT's GELU (DQ -> Div by sqrt(2) ->
// Erf -> Q). It runs after the weight DQs are folded, so a DQ'd scalar is a constant by then.
#include <optional>
#include <set>
#include <string>

#include "opt/fuse_qdq_params.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {
namespace {

// Elementwise float ops of one tensor whose kernels depend on nothing but their attributes.
bool isActivation(const ir::Graph& graph, const ir::Node& n) {
  static const std::set<std::string> kOps = {
      "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "LeakyRelu",  "Elu",  "Selu",
      "Celu",    "Relu", "Softplus",    "Softsign",  "Mish",       "Erf",  "Exp",
      "Log",     "Neg",  "Abs",         "Sqrt",      "Reciprocal", "Gelu", "ThresholdedRelu",
      "Clip"};
  if (!kOps.count(n.opType)) return false;
  if (n.opType != "Clip") return n.inputs.size() == 1;
  for (size_t k = 1; k < n.inputs.size(); ++k) {
    if (n.inputs[k] != ir::kNoValue && !constantValue(graph, n.inputs[k])) return false;
  }
  return true;
}

// Whether n maps `value` elementwise (an activation of it, or a binary op of it and a constant
// scalar), and at which input it reads it.
std::optional<size_t> lookupStepInput(const ir::Graph& graph, const ir::Node& n, int value) {
  static const std::set<std::string> kBinary = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"};
  if (!n.domain.empty() || n.outputs.size() != 1 || n.inputs.empty()) return std::nullopt;
  if (isActivation(graph, n)) {
    if (n.inputs[0] == value) return 0;
    return std::nullopt;
  }
  if (!kBinary.count(n.opType) || n.inputs.size() != 2 || n.inputs[0] == n.inputs[1])
    return std::nullopt;
  for (size_t k : {0, 1}) {
    const Tensor* other = constantValue(graph, n.inputs[1 - k]);
    if (n.inputs[k] == value && other && other->numel() == 1 &&
        other->dtype() == DataType::kFloat32)
      return k;
  }
  return std::nullopt;
}

// The node's kernel run with `value` as input `at` and the graph's constants as the others.
Tensor runWith(const ir::Graph& graph, const ir::Node& node, size_t at, const Tensor& value) {
  std::vector<const Tensor*> inputs;
  std::vector<ir::TypeInfo> types;
  types.reserve(node.inputs.size());
  std::vector<const ir::TypeInfo*> typePointers;
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    const int id = node.inputs[k];
    inputs.push_back(k == at ? &value : id == ir::kNoValue ? nullptr : constantValue(graph, id));
    types.push_back(
        inputs.back() ? ir::TypeInfo{inputs.back()->dtype(), ir::symShapeOf(inputs.back()->shape())}
                      : ir::TypeInfo{});
    typePointers.push_back(inputs.back() ? &types.back() : nullptr);
  }
  return evaluateNode(node, inputs, typePointers)[0];
}

// The 256 values of x's type, lowest first.
Tensor everyValue(DataType type) {
  Tensor t(type, {256});
  uint8_t* bytes = static_cast<uint8_t*>(t.raw());
  for (int v = 0; v < 256; ++v)
    bytes[v] = static_cast<uint8_t>(type == DataType::kInt8 ? v - 128 : v);
  return t;
}

}  // namespace

int fuseQdqLookups(ir::Graph& graph) {
  constexpr size_t kLongestChain = 8;
  const auto consumers = consumersOf(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (removed[i] || graph.nodes[i].inputs.empty()) continue;
    const auto dq = dequantizerOf(graph, graph.nodes[i].inputs[0]);
    if (!dq || !perTensorProblem(*dq, "input").empty()) continue;
    // The chain from node i: (node, the input it reads the chain at), up to a sole quantizer.
    std::vector<std::pair<size_t, size_t>> chain;
    std::optional<QuantParams> q;
    int value = graph.nodes[i].inputs[0];
    size_t node = i;
    while (chain.size() < kLongestChain) {
      const auto at = lookupStepInput(graph, graph.nodes[node], value);
      if (!at) break;
      chain.emplace_back(node, *at);
      value = graph.nodes[node].outputs[0];
      if ((q = soleQuantizerOf(graph, consumers, removed, value))) break;
      if (!onlyReadBy(graph, consumers, value)) break;
      node = static_cast<size_t>(consumers[static_cast<size_t>(value)][0]);
    }
    if (!q) continue;
    const ir::Node& dqNode = graph.nodes[static_cast<size_t>(dq->node)];
    const ir::Node& qNode = graph.nodes[static_cast<size_t>(q->node)];
    Tensor values = runWith(graph, dqNode, 0, everyValue(dq->type));
    for (const auto& [n, at] : chain) values = runWith(graph, graph.nodes[n], at, values);
    ir::Node fused;
    fused.name = graph.nodes[i].name;
    fused.domain = "kiln";
    fused.opType = "QLinearLookup";
    fused.opset = 1;
    fused.inputs = {dq->quantized,
                    addConstant(graph, fused.name + "_table", runWith(graph, qNode, 0, values))};
    fused.outputs = {q->quantized};
    if (onlyReadBy(graph, consumers, dqNode.outputs[0])) recordFusion(fused, dqNode);
    for (size_t k = 1; k < chain.size(); ++k) {
      recordFusion(fused, graph.nodes[chain[k].first]);
      removed[chain[k].first] = true;
    }
    recordFusion(fused, qNode);
    removed[static_cast<size_t>(q->node)] = true;
    graph.nodes[i] = std::move(fused);
  }
  return dropNodes(graph, removed);
}

}  // namespace kiln::opt
