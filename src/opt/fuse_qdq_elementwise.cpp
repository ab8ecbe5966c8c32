// DQ(a) [+ DQ(b)] -> Add / Mul / GlobalAveragePool -> Q, every parameter per tensor and constant
// ==> kiln::QLinearAdd / QLinearMul / QLinearGlobalAveragePool (ir/ops/quantized_elementwise.cpp),
// and DQ(x0), DQ(x1), ... -> Concat -> Q ==> kiln::QLinearConcat (the Concats whose inputs do not
// share the output's parameters; fuse_qdq_int8_moves.cpp takes those that do), which read and
// write the 8-bit tensors and compute what the nodes did. The DQs go with
// the last reader that needed them, so a residual Add between integer layers keeps its tensors
// int8.
#include "ir/node_attrs.h"
#include "opt/fuse_qdq_params.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {
namespace {

// The kiln op replacing a float op and how many quantized inputs it reads, or nullptr.
const char* quantizedOpFor(const ir::Node& n, size_t* operands) {
  if (!n.domain.empty() || n.outputs.size() != 1) return nullptr;
  *operands = n.inputs.size();
  if (n.opType == "Concat" && !n.inputs.empty()) return "QLinearConcat";
  *operands = 2;
  if (n.opType == "Add" && n.inputs.size() == 2) return "QLinearAdd";
  if (n.opType == "Mul" && n.inputs.size() == 2) return "QLinearMul";
  *operands = 1;
  if (n.opType == "GlobalAveragePool" && n.inputs.size() == 1) return "QLinearGlobalAveragePool";
  return nullptr;
}

}  // namespace

int fuseQdqElementwise(ir::Graph& graph) {
  const auto consumers = consumersOf(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    size_t operands = 0;
    const char* op = quantizedOpFor(graph.nodes[i], &operands);
    if (!op) continue;
    const auto q = soleQuantizerOf(graph, consumers, removed, graph.nodes[i].outputs[0]);
    if (!q) continue;
    std::vector<QuantParams> dqs;
    for (size_t k = 0; k < operands; ++k) {
      const auto dq = dequantizerOf(graph, graph.nodes[i].inputs[k]);
      if (!dq || !perTensorProblem(*dq, "input").empty()) break;
      dqs.push_back(*dq);
    }
    if (dqs.size() != operands) continue;
    ir::Node fused;
    fused.name = graph.nodes[i].name;
    fused.domain = "kiln";
    fused.opType = op;
    fused.opset = 1;
    const bool concat = graph.nodes[i].opType == "Concat";  // its output parameters come first
    if (concat) {
      fused.inputs = {q->scale, zeroPointInput(graph, *q)};
      fused.attrs["axis"] = ir::attrInt(graph.nodes[i], "axis", 1);  // required from opset 4
    }
    for (const QuantParams& dq : dqs) {
      fused.inputs.insert(fused.inputs.end(), {dq.quantized, dq.scale, zeroPointInput(graph, dq)});
    }
    if (!concat) fused.inputs.insert(fused.inputs.end(), {q->scale, zeroPointInput(graph, *q)});
    fused.outputs = {q->quantized};
    for (const QuantParams& dq : dqs) {
      const int read = graph.nodes[static_cast<size_t>(dq.node)].outputs[0];
      if (onlyReadBy(graph, consumers, read))
        recordFusion(fused, graph.nodes[static_cast<size_t>(dq.node)]);
    }
    recordFusion(fused, graph.nodes[static_cast<size_t>(q->node)]);
    removed[static_cast<size_t>(q->node)] = true;
    graph.nodes[i] = std::move(fused);
  }
  return dropNodes(graph, removed);
}

}  // namespace kiln::opt
