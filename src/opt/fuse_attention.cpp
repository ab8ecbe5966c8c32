// Self-attention as PyTorch exports it -> one kiln::FusedAttention node:
//   q = Transpose(Q, [0,2,1,3]); k = Transpose(K, [0,2,3,1]); v = Transpose(V, [0,2,1,3])
//   p = Softmax(MatMul(q, k) [* or / scalar constant] [+ mask], last axis)
//   y = Transpose(MatMul(p, v), [0,2,1,3])
// where Q, K, V are the projections reshaped to [batch, length, heads, dim]. The fused node reads
// them as they are and writes y in the same layout, so the four Transposes disappear with the rest.
#include <algorithm>
#include <cmath>

#include "ir/node_attrs.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {
namespace {

struct Walk {
  const ir::Graph& g;
  const std::vector<std::vector<int>>& consumers;
  const std::vector<bool>& removed;
  std::vector<int> nodes;  // matched so far

  bool usable(int index, const char* op) const {
    if (index < 0 || removed[static_cast<size_t>(index)]) return false;
    const ir::Node& n = g.nodes[static_cast<size_t>(index)];
    return n.domain.empty() && n.opType == op && n.outputs.size() == 1;
  }
  // The node making `value` when it is `op` and `value` has no other reader.
  const ir::Node* producer(int value, const char* op) {
    const int index = g.value(value).producer;
    if (!onlyReadBy(g, consumers, value) || !usable(index, op)) return nullptr;
    nodes.push_back(index);
    return &g.nodes[static_cast<size_t>(index)];
  }
  // The sole reader of `value` when it is `op` reading it as input `slot`.
  const ir::Node* reader(int value, const char* op, size_t slot) {
    if (!onlyReadBy(g, consumers, value)) return nullptr;
    const int index = consumers[static_cast<size_t>(value)][0];
    if (!usable(index, op)) return nullptr;
    const ir::Node& n = g.nodes[static_cast<size_t>(index)];
    if (n.inputs.size() <= slot || n.inputs[slot] != value) return nullptr;
    nodes.push_back(index);
    return &n;
  }
};

bool isTranspose(const ir::Node* n, const std::vector<int64_t>& perm) {
  return n && ir::attrInts(*n, "perm", {}) == perm;
}

// A rank-4 float32 value: the [batch, length, heads, dim] projections.
bool isFloat32Rank4(const ir::Graph& g, int value) {
  const auto& shape = g.value(value).type.shape;
  return isFloat32(g, value) && shape && shape->size() == 4;
}

// Whether two dims are equal whatever the inputs: equal known values or the same named symbol.
bool provablyEqual(const ir::Dim& a, const ir::Dim& b) {
  return a.isKnown() ? a.value == b.value
                     : !a.symbol.empty() && !b.isKnown() && a.symbol == b.symbol;
}

// Whether the mask may be added to the scores row by row: it has no more dims than they do, and
// no dim of it can enlarge theirs (a scores dim known to be 1 only meets a mask dim of 1, known
// dims agree). A dim the graph cannot settle (a symbol, or unknown) is checked by the kernel at run
// time, where a mask that would enlarge the scores is an error naming the node: the exported
// padding mask is [batch, 1, 1, seq] while the scores' dims are often unknown after the Reshapes.
bool maskFitsScores(const ir::Graph& g, int mask, int scores) {
  const auto& m = g.value(mask).type.shape;
  const auto& s = g.value(scores).type.shape;
  if (!isFloat32(g, mask) || !m || !s || m->size() > s->size()) return false;
  for (size_t i = 0; i < m->size(); ++i) {
    const ir::Dim& md = (*m)[m->size() - 1 - i];
    const ir::Dim& sd = (*s)[s->size() - 1 - i];
    if (md.isKnown() && md.value == 1) continue;
    if (provablyEqual(md, sd)) continue;
    if (sd.isKnown() && (sd.value == 1 || md.isKnown())) return false;
  }
  return true;
}

bool allZero(const Tensor& t) {
  const float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] != 0.0f) return false;
  }
  return true;
}

// Softmax over the last axis of a rank-4 input (before opset 13 the input is flattened at `axis`,
// which for axis 3 is the same thing).
bool softmaxOverLastAxis(const ir::Graph& g, const ir::Node& softmax) {
  if (softmax.inputs.size() != 1 || !isFloat32Rank4(g, softmax.inputs[0])) return false;
  const int64_t axis = ir::attrInt(softmax, "axis", softmax.opset >= 13 ? -1 : 1);
  return axis == -1 || axis == 3;
}

struct Scores {
  const ir::Node* qk = nullptr;  // MatMul(q, k)
  float scale = 1.0f;
  bool scaled = false;
  int mask = ir::kNoValue;
};

// Walks back from the softmax input through [Add mask], [Mul/Div scale] to MatMul(q, k).
bool matchScores(Walk& w, int value, Scores* out) {
  const int index = w.g.value(value).producer;
  if (w.usable(index, "Add") && onlyReadBy(w.g, w.consumers, value)) {
    const ir::Node& add = w.g.nodes[static_cast<size_t>(index)];
    // A scale above the mask would scale the mask too: only scale-then-mask is matched.
    if (add.inputs.size() != 2 || add.inputs[0] == add.inputs[1] || out->mask != ir::kNoValue ||
        out->scaled)
      return false;
    for (int side = 0; side < 2; ++side) {
      Walk attempt = w;
      attempt.nodes.push_back(index);
      Scores s = *out;
      s.mask = add.inputs[static_cast<size_t>(1 - side)];
      if (matchScores(attempt, add.inputs[static_cast<size_t>(side)], &s) &&
          maskFitsScores(w.g, s.mask, s.qk->outputs[0])) {
        w.nodes = std::move(attempt.nodes);
        *out = s;
        return true;
      }
    }
    return false;
  }
  const bool mul = w.usable(index, "Mul"), div = w.usable(index, "Div");
  if ((mul || div) && onlyReadBy(w.g, w.consumers, value) && !out->scaled) {
    const ir::Node& n = w.g.nodes[static_cast<size_t>(index)];
    if (n.inputs.size() != 2) return false;
    for (int side = 0; side < (mul ? 2 : 1); ++side) {
      const std::optional<float> c = scalarConstant(w.g, n.inputs[static_cast<size_t>(1 - side)]);
      if (!c || *c == 0.0f || !std::isfinite(*c)) continue;
      Walk attempt = w;
      attempt.nodes.push_back(index);
      Scores s = *out;
      s.scale = div ? 1.0f / *c : *c;
      s.scaled = true;
      if (matchScores(attempt, n.inputs[static_cast<size_t>(side)], &s)) {
        w.nodes = std::move(attempt.nodes);
        *out = s;
        return true;
      }
    }
    return false;
  }
  const ir::Node* qk = w.producer(value, "MatMul");
  if (!qk || qk->inputs.size() != 2) return false;
  out->qk = qk;
  return true;
}

}  // namespace

int fuseAttention(ir::Graph& graph) {
  const auto consumers = consumersOf(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& softmax = graph.nodes[i];
    if (removed[i] || !softmax.domain.empty() || softmax.opType != "Softmax" ||
        !softmaxOverLastAxis(graph, softmax)) {
      continue;
    }
    Walk w{graph, consumers, removed, {static_cast<int>(i)}};
    Scores scores;
    if (!matchScores(w, softmax.inputs[0], &scores)) continue;
    const ir::Node* qT = w.producer(scores.qk->inputs[0], "Transpose");
    const ir::Node* kT = w.producer(scores.qk->inputs[1], "Transpose");
    const ir::Node* pv = w.reader(softmax.outputs[0], "MatMul", 0);
    const ir::Node* vT =
        pv && pv->inputs.size() == 2 ? w.producer(pv->inputs[1], "Transpose") : nullptr;
    const ir::Node* outT = pv ? w.reader(pv->outputs[0], "Transpose", 0) : nullptr;
    const std::vector<int64_t> heads{0, 2, 1, 3};
    if (!isTranspose(qT, heads) || !isTranspose(kT, {0, 2, 3, 1}) || !isTranspose(vT, heads) ||
        !isTranspose(outT, heads)) {
      continue;
    }
    const int q = qT->inputs[0], k = kT->inputs[0], v = vT->inputs[0];
    if (!isFloat32Rank4(graph, q) || !isFloat32Rank4(graph, k) || !isFloat32Rank4(graph, v))
      continue;
    ir::Node fused;
    fused.name = scores.qk->name;
    fused.domain = "kiln";
    fused.opType = "FusedAttention";
    fused.opset = 1;
    fused.inputs = {q, k, v};
    // An all-zero constant mask (the exported mask of a sequence without padding) adds nothing.
    const Tensor* maskValue = constantValue(graph, scores.mask);
    if (scores.mask != ir::kNoValue && !(maskValue && allZero(*maskValue)))
      fused.inputs.push_back(scores.mask);
    fused.outputs = {outT->outputs[0]};
    fused.attrs["scale"] = scores.scale;
    std::vector<int> absorbed = w.nodes;
    std::sort(absorbed.begin(), absorbed.end());
    for (int index : absorbed) {
      const ir::Node& n = graph.nodes[static_cast<size_t>(index)];
      if (&n != scores.qk) recordFusion(fused, n);
      removed[static_cast<size_t>(index)] = true;
    }
    removed[i] = false;
    graph.nodes[i] = std::move(fused);
  }
  return dropNodes(graph, removed);
}

}  // namespace kiln::opt
