// DQ(x) -> f -> Q with f one activation of one float tensor (Sigmoid, Tanh, HardSwish, ...; Clip
// with constant bounds) and per-tensor constant parameters ==> kiln::QLinearLookup(x, table)
// (ir/ops/quantized_elementwise.cpp). An 8-bit x takes 256 values: the table is those values sent
// through the three nodes' own kernels when the model is built, so the lookup gives the bytes the
// chain gives. EfficientNet's SiLU is the case that matters: its Sigmoid between a DQ and a Q.
#include <set>
#include <string>

#include "backends/cpu/kernel.h"
#include "engine/executor.h"
#include "kiln/error.h"
#include "opt/fuse_qdq_params.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {
namespace {

// Elementwise float ops of one tensor whose kernels depend on nothing but their attributes.
bool isLookupActivation(const ir::Graph& graph, const ir::Node& n) {
  static const std::set<std::string> kOps = {
      "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "LeakyRelu",  "Elu",  "Selu",
      "Celu",    "Relu", "Softplus",    "Softsign",  "Mish",       "Erf",  "Exp",
      "Log",     "Neg",  "Abs",         "Sqrt",      "Reciprocal", "Gelu", "ThresholdedRelu",
      "Clip"};
  if (!n.domain.empty() || n.outputs.size() != 1 || n.inputs.empty() || !kOps.count(n.opType))
    return false;
  if (n.opType != "Clip") return n.inputs.size() == 1;
  for (size_t k = 1; k < n.inputs.size(); ++k) {
    if (n.inputs[k] != ir::kNoValue && !constantValue(graph, n.inputs[k])) return false;
  }
  return true;
}

// The node's kernel run with `first` as input 0 and the graph's constants as the others.
Tensor runWith(const ir::Graph& graph, const ir::Node& node, const Tensor& first) {
  std::vector<const Tensor*> inputs;
  std::vector<ir::TypeInfo> types;
  types.reserve(node.inputs.size());
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    const int id = node.inputs[k];
    inputs.push_back(k == 0 ? &first : id == ir::kNoValue ? nullptr : constantValue(graph, id));
    types.push_back(
        inputs.back() ? ir::TypeInfo{inputs.back()->dtype(), ir::symShapeOf(inputs.back()->shape())}
                      : ir::TypeInfo{});
  }
  cpu::KernelCreateInfo info{node, {}, {}, {}};
  for (size_t k = 0; k < inputs.size(); ++k) {
    info.inputTypes.push_back(inputs[k] ? &types[k] : nullptr);
    info.constants.push_back(inputs[k]);
  }
  const ir::OpSchema* schema =
      ir::OpSchemaRegistry::global().find(node.domain, node.opType, node.opset);
  const cpu::KernelFactory* factory = cpu::KernelRegistry::global().find(node.domain, node.opType);
  if (!schema || !factory) {
    throw Error(ErrorCode::kUnsupportedNode,
                "node '" + node.name + "': no kernel to tabulate " + node.opType + " with");
  }
  return runNode(node, *schema, (*factory)(info), inputs)[0];
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
  const auto consumers = consumersOf(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& f = graph.nodes[i];
    if (!isLookupActivation(graph, f)) continue;
    const auto dq = dequantizerOf(graph, f.inputs[0]);
    if (!dq || !perTensorProblem(*dq, "input").empty()) continue;
    const auto q = soleQuantizerOf(graph, consumers, removed, f.outputs[0]);
    if (!q) continue;
    const ir::Node& dqNode = graph.nodes[static_cast<size_t>(dq->node)];
    const ir::Node& qNode = graph.nodes[static_cast<size_t>(q->node)];
    const Tensor table =
        runWith(graph, qNode, runWith(graph, f, runWith(graph, dqNode, everyValue(dq->type))));
    ir::Node fused;
    fused.name = f.name;
    fused.domain = "kiln";
    fused.opType = "QLinearLookup";
    fused.opset = 1;
    fused.inputs = {dq->quantized, addConstant(graph, f.name + "_table", table)};
    fused.outputs = {q->quantized};
    if (onlyReadBy(graph, consumers, dqNode.outputs[0])) recordFusion(fused, dqNode);
    recordFusion(fused, qNode);
    removed[static_cast<size_t>(q->node)] = true;
    graph.nodes[i] = std::move(fused);
  }
  return dropNodes(graph, removed);
}

}  // namespace kiln::opt
