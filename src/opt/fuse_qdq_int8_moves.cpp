// DequantizeLinear -> op -> QuantizeLinear with the same scale and zero point on both sides, where
// the op only moves, selects or picks the maximum of values (MaxPool, Reshape, Transpose, Flatten,
// Squeeze, Unsqueeze, Slice, Concat, nearest Resize): the op runs on the int8 tensor itself.
// Exact: such an op commutes with the (monotonic) dequantization, and Q(DQ(q)) = q at equal
// parameters. The DQ disappears once nothing else reads it, and the Q with it.
#include "ir/node_attrs.h"
#include "opt/fuse_qdq_params.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {
namespace {

// The inputs of `node` that carry its data (the others are shapes, axes, indices...), or none
// when the op does not run on 8-bit data unchanged.
std::vector<size_t> dataInputs(const ir::Node& n) {
  if (!n.domain.empty() || n.inputs.empty() || n.outputs.size() != 1) return {};
  const std::string& op = n.opType;
  if (op == "Concat") {
    std::vector<size_t> all(n.inputs.size());
    for (size_t k = 0; k < all.size(); ++k) all[k] = k;
    return all;
  }
  if (op == "Resize")
    return ir::attrString(n, "mode", "nearest") == "nearest" ? std::vector<size_t>{0}
                                                             : std::vector<size_t>{};
  for (const char* moving :
       {"MaxPool", "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Slice"}) {
    if (op == moving) return {0};
  }
  return {};
}

}  // namespace

int runInt8DataMovement(ir::Graph& graph) {
  const auto consumers = consumersOf(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    ir::Node& n = graph.nodes[i];
    const std::vector<size_t> data = dataInputs(n);
    if (data.empty()) continue;
    const auto q = soleQuantizerOf(graph, consumers, removed, n.outputs[0]);
    if (!q) continue;
    std::vector<QuantParams> dqs;
    for (size_t k : data) {
      const auto dq = dequantizerOf(graph, n.inputs[k]);
      if (!dq || !sameParams(*dq, *q)) break;
      dqs.push_back(*dq);
    }
    if (dqs.size() != data.size()) continue;
    for (size_t k = 0; k < data.size(); ++k) n.inputs[data[k]] = dqs[k].quantized;
    n.outputs[0] = q->quantized;
    recordFusion(n, graph.nodes[static_cast<size_t>(q->node)]);
    removed[static_cast<size_t>(q->node)] = true;
  }
  return dropNodes(graph, removed);
}

}  // namespace kiln::opt
