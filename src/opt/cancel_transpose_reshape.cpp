// Layout no-ops: consecutive Transposes compose into one (and vanish when the composition is the
// identity), an identity Transpose is bypassed, and a Reshape of a Reshape reshapes the original.
#include <numeric>

#include "ir/node_attrs.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {
namespace {

std::optional<std::vector<int64_t>> permOf(const ir::Graph& g, const ir::Node& t) {
  if (!t.domain.empty() || t.opType != "Transpose" || t.inputs.size() != 1 || t.outputs.size() != 1)
    return std::nullopt;
  if (ir::hasAttr(t, "perm")) return ir::attrInts(t, "perm");
  const auto& shape = g.value(t.inputs[0]).type.shape;
  if (!shape) return std::nullopt;
  std::vector<int64_t> reversed(shape->size());
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  return reversed;
}

bool isIdentity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// Makes every reader of `from` read `to` instead; false (nothing changed) if `from` is a graph
// output.
bool redirect(ir::Graph& g, const std::vector<std::vector<int>>& consumers, int from, int to) {
  if (isGraphOutput(g, from)) return false;
  for (int c : consumers[static_cast<size_t>(from)]) {
    for (int& id : g.nodes[static_cast<size_t>(c)].inputs) {
      if (id == from) id = to;
    }
  }
  return true;
}

// A Reshape whose target shape is a constant free of 0s (0 would copy a dim of its own input).
bool reshapeToConstant(const ir::Graph& g, const ir::Node& r) {
  if (!r.domain.empty() || r.opType != "Reshape" || r.inputs.size() != 2 || r.outputs.size() != 1)
    return false;
  const Tensor* shape = constantValue(g, r.inputs[1]);
  if (!shape || shape->dtype() != DataType::kInt64) return false;
  for (int64_t k = 0; k < shape->numel(); ++k) {
    if (shape->data<int64_t>()[k] == 0) return false;
  }
  return true;
}

}  // namespace

int cancelTransposesAndReshapes(ir::Graph& graph) {
  const auto consumers = consumersOf(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (removed[i]) continue;
    ir::Node& node = graph.nodes[i];
    if (auto perm = permOf(graph, node)) {
      // Transpose(Transpose(x, p1), p2) = Transpose(x, q) with q[k] = p1[p2[k]].
      const int in = node.inputs[0];
      const int producer = graph.value(in).producer;
      if (producer >= 0 && !removed[static_cast<size_t>(producer)] &&
          onlyReadBy(graph, consumers, in)) {
        const ir::Node& before = graph.nodes[static_cast<size_t>(producer)];
        auto first = permOf(graph, before);
        if (first && first->size() == perm->size()) {
          std::vector<int64_t> composed(perm->size());
          for (size_t k = 0; k < perm->size(); ++k)
            composed[k] = (*first)[static_cast<size_t>((*perm)[k])];
          node.inputs[0] = before.inputs[0];
          node.attrs["perm"] = composed;
          recordFusion(node, before);
          removed[static_cast<size_t>(producer)] = true;
          perm = composed;
        }
      }
      if (isIdentity(*perm) && redirect(graph, consumers, node.outputs[0], node.inputs[0]))
        removed[i] = true;
      continue;
    }
    if (reshapeToConstant(graph, node)) {
      const int in = node.inputs[0];
      const int producer = graph.value(in).producer;
      if (producer < 0 || removed[static_cast<size_t>(producer)] ||
          !onlyReadBy(graph, consumers, in))
        continue;
      const ir::Node& before = graph.nodes[static_cast<size_t>(producer)];
      if (!before.domain.empty() || before.opType != "Reshape" || before.inputs.size() != 2)
        continue;
      node.inputs[0] = before.inputs[0];
      recordFusion(node, before);
      removed[static_cast<size_t>(producer)] = true;
    }
  }
  return dropNodes(graph, removed);
}

}  // namespace kiln::opt
