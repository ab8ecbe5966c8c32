// The query, key and value projections of a kiln::FusedAttention, three Linear layers on the same
// input, become one FusedMatMul with the three weight matrices side by side: one GEMM of three
// times the width (A is packed once, and two threads split a wider product more evenly). The
// attention then reads Q, K and V from that one [batch, length, 3 * heads * dim] output.
#include <algorithm>
#include <optional>

#include "ir/node_attrs.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"
#include "opt/shape_proof.h"

namespace kiln::opt {
namespace {

// One projection: Reshape(FusedMatMul(A, W, bias), [rows..., heads, dim]) read only by the
// attention.
struct Projection {
  int reshape = -1, matmul = -1;
  const Tensor* weights = nullptr;
  const Tensor* bias = nullptr;
  int64_t heads = 0, dim = 0;
};

std::optional<Projection> projectionOf(const ir::Graph& g,
                                       const std::vector<std::vector<int>>& consumers, int value) {
  Projection p;
  p.reshape = g.value(value).producer;
  if (p.reshape < 0 || !onlyReadBy(g, consumers, value)) return std::nullopt;
  const ir::Node& reshape = g.nodes[static_cast<size_t>(p.reshape)];
  if (!reshape.domain.empty() || reshape.opType != "Reshape" || reshape.inputs.empty())
    return std::nullopt;
  const int projected = reshape.inputs[0];
  p.matmul = g.value(projected).producer;
  if (p.matmul < 0 || !onlyReadBy(g, consumers, projected)) return std::nullopt;
  const ir::Node& mm = g.nodes[static_cast<size_t>(p.matmul)];
  if (mm.domain != "kiln" || mm.opType != "FusedMatMul" || mm.inputs.size() != 3 ||
      !ir::attrString(mm, "activation", "").empty()) {
    return std::nullopt;
  }
  p.weights = constantValue(g, mm.inputs[1]);
  p.bias = constantValue(g, mm.inputs[2]);
  if (!p.weights || !p.bias || p.weights->dtype() != DataType::kFloat32 || p.weights->rank() != 2 ||
      p.bias->dtype() != DataType::kFloat32 || p.bias->numel() != p.weights->dim(1)) {
    return std::nullopt;
  }
  // The Reshape only splits the last dim into [heads, dim]: rows stay as they are.
  const auto& in = g.value(projected).type.shape;
  const auto& out = g.value(value).type.shape;
  if (!in || !out || in->size() != 3 || out->size() != 4 || !(*out)[2].isKnown() ||
      !(*out)[3].isKnown() || (*out)[2].value * (*out)[3].value != p.weights->dim(1) ||
      !provablySameDim(g, value, 0, projected, 0) || !provablySameDim(g, value, 1, projected, 1)) {
    return std::nullopt;
  }
  p.heads = (*out)[2].value;
  p.dim = (*out)[3].value;
  return p;
}

// [K, N] weight matrices side by side: [K, 3N]; biases one after another.
Tensor concatColumns(const std::vector<const Tensor*>& parts) {
  const int64_t K = parts[0]->dim(0);
  int64_t total = 0;
  for (const Tensor* t : parts) total += t->dim(t->rank() - 1);
  Tensor out(DataType::kFloat32, parts[0]->rank() == 2 ? Shape{K, total} : Shape{total});
  const int64_t rows = parts[0]->rank() == 2 ? K : 1;
  float* dst = out.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (const Tensor* t : parts) {
      const int64_t n = t->dim(t->rank() - 1);
      const float* src = t->data<float>() + r * n;
      dst = std::copy(src, src + n, dst);
    }
  }
  return out;
}

}  // namespace

int packAttentionProjections(ir::Graph& graph) {
  const auto consumers = consumersOf(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  std::vector<ir::Node> added;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    ir::Node& attention = graph.nodes[i];
    if (attention.domain != "kiln" || attention.opType != "FusedAttention" ||
        attention.inputs.size() < 3)
      continue;
    std::optional<Projection> p[3];
    bool ok = true;
    for (int k = 0; k < 3 && ok; ++k) {
      p[k] = projectionOf(graph, consumers, attention.inputs[static_cast<size_t>(k)]);
      ok = p[k] && !removed[static_cast<size_t>(p[k]->matmul)];
    }
    if (!ok) continue;
    const ir::Node& q = graph.nodes[static_cast<size_t>(p[0]->matmul)];
    bool alike = true;
    for (int k = 1; k < 3; ++k) {
      const ir::Node& other = graph.nodes[static_cast<size_t>(p[k]->matmul)];
      alike = alike && other.inputs[0] == q.inputs[0] && p[k]->heads == p[0]->heads &&
              p[k]->dim == p[0]->dim && p[k]->weights->dim(0) == p[0]->weights->dim(0);
    }
    if (!alike || p[0]->matmul == p[1]->matmul || p[1]->matmul == p[2]->matmul ||
        p[0]->matmul == p[2]->matmul)
      continue;
    // Named after the query projection, which it replaces first in line (kiln_fused_from lists it
    // first).
    ir::Node packed = q;
    Tensor weights = concatColumns({p[0]->weights, p[1]->weights, p[2]->weights});
    Tensor bias =
        concatColumns({p[0]->bias, p[1]->bias, p[2]->bias});  // before adding values moves them
    const int weightsId = addConstant(graph, q.name + "_qkv_weights", std::move(weights));
    const int biasId = addConstant(graph, q.name + "_qkv_bias", std::move(bias));
    packed.inputs = {q.inputs[0], weightsId, biasId};
    ir::TypeInfo type = graph.value(q.outputs[0]).type;
    type.shape->back() = ir::Dim::known(3 * p[0]->heads * p[0]->dim);
    packed.outputs = {graph.addValue(q.name + "_qkv_output", type)};
    for (int k = 0; k < 3; ++k) {
      if (k > 0) recordFusion(packed, graph.nodes[static_cast<size_t>(p[k]->matmul)]);
      recordFusion(attention, graph.nodes[static_cast<size_t>(p[k]->reshape)]);
      removed[static_cast<size_t>(p[k]->matmul)] = true;
      removed[static_cast<size_t>(p[k]->reshape)] = true;
    }
    attention.inputs[0] = packed.outputs[0];
    attention.inputs[1] = ir::kNoValue;
    attention.inputs[2] = ir::kNoValue;
    attention.attrs["num_heads"] = p[0]->heads;
    added.push_back(std::move(packed));
  }
  const int dropped = static_cast<int>(std::count(removed.begin(), removed.end(), true));
  if (dropped == 0) return 0;
  for (ir::Node& n : added) {
    graph.nodes.push_back(std::move(n));
    removed.push_back(false);
  }
  return dropNodes(graph, removed) - static_cast<int>(added.size());
}

}  // namespace kiln::opt
