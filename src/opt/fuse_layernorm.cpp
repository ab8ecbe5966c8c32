// The LayerNorm subgraph PyTorch exports before opset 17 -> one LayerNormalization node:
//   m = ReduceMean(x, axes=[-1]); d = Sub(x, m); v = ReduceMean(Pow(d, 2), axes=[-1]);
//   y = Add(Mul(Div(d, Sqrt(Add(v, eps))), gamma), beta)
#include "ir/node_attrs.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {
namespace {

struct Matcher {
  const ir::Graph& g;
  const std::vector<std::vector<int>>& consumers;
  std::vector<int> nodes;  // matched so far

  // The sole reader of value if it is `op` (default domain) reading value as input `slot` (-1:
  // any).
  const ir::Node* next(int value, const char* op, int slot = -1) {
    if (!onlyReadBy(g, consumers, value)) return nullptr;
    return take(consumers[static_cast<size_t>(value)][0], value, op, slot);
  }
  const ir::Node* take(int index, int value, const char* op, int slot) {
    const ir::Node& n = g.nodes[static_cast<size_t>(index)];
    if (!n.domain.empty() || n.opType != op || n.outputs.size() != 1) return nullptr;
    if (slot >= 0 &&
        (static_cast<int>(n.inputs.size()) <= slot || n.inputs[static_cast<size_t>(slot)] != value))
      return nullptr;
    nodes.push_back(index);
    return &n;
  }
};

// Whether a ReduceMean averages only the last axis of a rank-`rank` input, keeping dims.
bool meansLastAxis(const ir::Graph& g, const ir::Node& r, size_t rank) {
  if (ir::attrInt(r, "keepdims", 1) != 1) return false;
  std::vector<int64_t> axes;
  if (r.inputs.size() > 1 && r.inputs[1] != ir::kNoValue) {  // opset 18: axes as an input
    const Tensor* t = constantValue(g, r.inputs[1]);
    if (!t || t->dtype() != DataType::kInt64) return false;
    axes.assign(t->data<int64_t>(), t->data<int64_t>() + t->numel());
  } else {
    axes = ir::attrInts(r, "axes", {});
  }
  return axes.size() == 1 && (axes[0] == -1 || axes[0] == static_cast<int64_t>(rank) - 1);
}

// The other input of a two-input node that reads `value`, or kNoValue.
int other(const ir::Node& n, int value) {
  if (n.inputs.size() != 2) return ir::kNoValue;
  return n.inputs[0] == value ? n.inputs[1] : n.inputs[1] == value ? n.inputs[0] : ir::kNoValue;
}

}  // namespace

int fuseLayerNormPattern(ir::Graph& graph) {
  const auto consumers = consumersOf(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& mean = graph.nodes[i];
    if (!mean.domain.empty() || mean.opType != "ReduceMean" || removed[i] || mean.inputs.empty())
      continue;
    const int x = mean.inputs[0];
    const auto& shape = graph.value(x).type.shape;
    if (!isFloat32(graph, x) || !shape || shape->empty() ||
        !meansLastAxis(graph, mean, shape->size()))
      continue;
    Matcher m{graph, consumers, {static_cast<int>(i)}};
    const ir::Node* sub = m.next(mean.outputs[0], "Sub", 1);
    if (!sub || sub->inputs[0] != x) continue;
    const int d = sub->outputs[0];
    const auto& dReaders = consumers[static_cast<size_t>(d)];
    if (dReaders.size() != 2 || isGraphOutput(graph, d)) continue;
    // d is read by the Pow and by the Div, in either order.
    const int first = graph.nodes[static_cast<size_t>(dReaders[0])].opType == "Pow" ? 0 : 1;
    const ir::Node* pow = m.take(dReaders[first], d, "Pow", 0);
    if (!pow) continue;
    std::optional<float> exponent = scalarConstant(graph, pow->inputs[1]);
    if (!exponent || *exponent != 2.0f) continue;
    const ir::Node* var = m.next(pow->outputs[0], "ReduceMean", 0);
    if (!var || !meansLastAxis(graph, *var, shape->size())) continue;
    const ir::Node* addEps = m.next(var->outputs[0], "Add");
    std::optional<float> eps =
        addEps ? scalarConstant(graph, other(*addEps, var->outputs[0])) : std::nullopt;
    if (!eps) continue;
    const ir::Node* sqrt = m.next(addEps->outputs[0], "Sqrt", 0);
    if (!sqrt) continue;
    const ir::Node* div = m.next(sqrt->outputs[0], "Div", 1);
    if (!div || div->inputs[0] != d || m.take(dReaders[1 - first], d, "Div", 0) != div) continue;
    m.nodes.pop_back();  // the Div was taken twice
    const ir::Node* mul = m.next(div->outputs[0], "Mul");
    const int gamma = mul ? other(*mul, div->outputs[0]) : ir::kNoValue;
    const ir::Node* add = mul ? m.next(mul->outputs[0], "Add") : nullptr;
    const int beta = add ? other(*add, mul->outputs[0]) : ir::kNoValue;
    const Tensor* gammaValue = constantValue(graph, gamma);
    const Tensor* betaValue = constantValue(graph, beta);
    const ir::Dim& last = shape->back();
    if (!gammaValue || !betaValue || gammaValue->rank() != 1 || betaValue->rank() != 1 ||
        !last.isKnown() || gammaValue->numel() != last.value || betaValue->numel() != last.value ||
        gammaValue->dtype() != DataType::kFloat32 || betaValue->dtype() != DataType::kFloat32) {
      continue;
    }
    ir::Node ln;
    ln.name = mean.name;
    ln.opType = "LayerNormalization";
    ln.opset = mean.opset;
    ln.inputs = {x, gamma, beta};
    ln.outputs = {add->outputs[0]};
    ln.attrs["axis"] = int64_t{-1};
    ln.attrs["epsilon"] = *eps;
    for (int k : m.nodes) {
      if (k != static_cast<int>(i)) recordFusion(ln, graph.nodes[static_cast<size_t>(k)]);
      removed[static_cast<size_t>(k)] = true;
    }
    removed[i] = false;
    graph.nodes[i] = std::move(ln);
  }
  return dropNodes(graph, removed);
}

}  // namespace kiln::opt
