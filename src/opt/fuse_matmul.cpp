// MatMul(A, constant 2-D B) + Add(bias) [+ Add(residual)] [+ activation] -> kiln::FusedMatMul,
// the Linear layers of transformer blocks (bias, then the residual add or the GELU).
#include "ir/node_attrs.h"
#include "opt/activation_match.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"
#include "opt/shape_proof.h"

namespace kiln::opt {
namespace {

// The Add that alone reads `value`, with its other input, or -1.
int soleAdd(const ir::Graph& g, const std::vector<std::vector<int>>& consumers,
            const std::vector<bool>& removed, int value, int* other) {
  if (!onlyReadBy(g, consumers, value)) return -1;
  const int index = consumers[static_cast<size_t>(value)][0];
  const ir::Node& add = g.nodes[static_cast<size_t>(index)];
  if (removed[static_cast<size_t>(index)] || !add.domain.empty() || add.opType != "Add" ||
      add.inputs.size() != 2 || add.inputs[0] == add.inputs[1]) {
    return -1;
  }
  *other = add.inputs[0] == value ? add.inputs[1] : add.inputs[0];
  return index;
}

// FusedMatMul(A, B, bias) + Z -> FusedMatMul(A, B, bias, Z) [+ activation] where the shapes are
// symbolic and Z is proved to be shaped like the output by tracing both back to where their dims
// come from (the kernel adds Z element by element, without broadcasting). A second sweep, once
// the first has left the graph consistent, so the trace sees the fused nodes.
int fuseSymbolicResiduals(ir::Graph& graph) {
  const auto consumers = consumersOf(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  // Decide on the graph as it is, then rewrite: a rewritten node would end the traces through it.
  struct Residual {
    size_t node;
    int add, z;
  };
  std::vector<Residual> found;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& node = graph.nodes[i];
    if (node.domain != "kiln" || node.opType != "FusedMatMul" || node.inputs.size() != 3 ||
        !ir::attrString(node, "activation", "").empty()) {
      continue;
    }
    int z = ir::kNoValue;
    const int add = soleAdd(graph, consumers, removed, node.outputs[0], &z);
    if (add >= 0 && isFloat32(graph, z) && provablySameShape(graph, z, node.outputs[0]))
      found.push_back({i, add, z});
  }
  for (const Residual& r : found) {
    ir::Node fused = graph.nodes[r.node];
    fused.inputs.push_back(r.z);
    recordFusion(fused, graph.nodes[static_cast<size_t>(r.add)]);
    removed[static_cast<size_t>(r.add)] = true;
    int out = graph.nodes[static_cast<size_t>(r.add)].outputs[0];
    absorbActivation(graph, consumers, removed, fused, &out);
    fused.outputs[0] = out;
    graph.nodes[r.node] = std::move(fused);
  }
  return dropNodes(graph, removed);
}

}  // namespace

int fuseMatMulEpilogues(ir::Graph& graph) {
  const auto consumers = consumersOf(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    ir::Node& matmul = graph.nodes[i];
    if (!matmul.domain.empty() || matmul.opType != "MatMul" || matmul.inputs.size() != 2 ||
        removed[i])
      continue;
    const Tensor* b = constantValue(graph, matmul.inputs[1]);
    if (!b || b->dtype() != DataType::kFloat32 || b->rank() != 2 ||
        !isFloat32(graph, matmul.inputs[0]))
      continue;
    const auto& aShape = graph.value(matmul.inputs[0]).type.shape;
    if (!aShape || aShape->size() < 2) continue;
    int bias = ir::kNoValue;
    const int biasAdd = soleAdd(graph, consumers, removed, matmul.outputs[0], &bias);
    const Tensor* biasValue = biasAdd >= 0 ? constantValue(graph, bias) : nullptr;
    if (!biasValue || biasValue->dtype() != DataType::kFloat32 || biasValue->rank() != 1 ||
        biasValue->numel() != b->dim(1)) {
      continue;
    }
    ir::Node fused = matmul;
    fused.domain = "kiln";
    fused.opType = "FusedMatMul";
    fused.opset = 1;
    fused.inputs.push_back(bias);
    recordFusion(fused, graph.nodes[static_cast<size_t>(biasAdd)]);
    removed[static_cast<size_t>(biasAdd)] = true;
    int out = graph.nodes[static_cast<size_t>(biasAdd)].outputs[0];
    int z = ir::kNoValue;
    const int residualAdd = soleAdd(graph, consumers, removed, out, &z);
    if (residualAdd >= 0 && isFloat32(graph, z) && sameKnownShape(graph, z, out) &&
        sameKnownShape(graph, graph.nodes[static_cast<size_t>(residualAdd)].outputs[0], out)) {
      fused.inputs.push_back(z);
      recordFusion(fused, graph.nodes[static_cast<size_t>(residualAdd)]);
      removed[static_cast<size_t>(residualAdd)] = true;
      out = graph.nodes[static_cast<size_t>(residualAdd)].outputs[0];
    }
    absorbActivation(graph, consumers, removed, fused, &out);
    fused.outputs[0] = out;
    matmul = std::move(fused);
  }
  return dropNodes(graph, removed) + fuseSymbolicResiduals(graph);
}

}  // namespace kiln::opt
