#include "opt/activation_match.h"

#include <cmath>
#include <limits>

#include "ir/node_attrs.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {
namespace {

bool isOp(const ir::Node& node, const char* op) { return node.domain.empty() && node.opType == op; }

// The node's other input when it is a two-input node with `value` as one of them.
int otherInput(const ir::Node& node, int value) {
  if (node.inputs.size() != 2) return ir::kNoValue;
  if (node.inputs[0] == value) return node.inputs[1];
  if (node.inputs[1] == value) return node.inputs[0];
  return ir::kNoValue;
}

bool nearly(std::optional<float> v, float expected) {
  return v && std::fabs(*v - expected) <= 1e-6f * std::fabs(expected);
}

// The single reader of `value`, if it is exactly one node and `value` is not a graph output.
const ir::Node* soleReader(const ir::Graph& g, const std::vector<std::vector<int>>& consumers,
                           int value, int* index) {
  if (!onlyReadBy(g, consumers, value)) return nullptr;
  *index = consumers[static_cast<size_t>(value)][0];
  return &g.nodes[static_cast<size_t>(*index)];
}

// Clip's bounds: attributes before opset 11, optional constant inputs after.
std::optional<std::vector<float>> clipBounds(const ir::Graph& g, const ir::Node& clip) {
  const float inf = std::numeric_limits<float>::infinity();
  if (clip.opset < 11)
    return std::vector<float>{ir::attrFloat(clip, "min", -inf), ir::attrFloat(clip, "max", inf)};
  std::vector<float> bounds{-inf, inf};
  for (size_t k = 1; k < clip.inputs.size() && k < 3; ++k) {
    if (clip.inputs[k] == ir::kNoValue) continue;
    std::optional<float> v = scalarConstant(g, clip.inputs[k]);
    if (!v) return std::nullopt;
    bounds[k - 1] = *v;
  }
  return bounds;
}

std::optional<ActivationMatch> singleOp(const ir::Graph& g, int index) {
  const ir::Node& n = g.nodes[static_cast<size_t>(index)];
  if (!n.domain.empty() || n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue)
    return std::nullopt;
  ActivationMatch m{n.opType, {}, {index}, n.outputs[0]};
  if (n.opType == "Relu" || n.opType == "Sigmoid" || n.opType == "HardSwish") return m;
  if (n.opType == "LeakyRelu") {
    m.params = {ir::attrFloat(n, "alpha", 0.01f)};
    return m;
  }
  if (n.opType == "HardSigmoid") {
    m.params = {ir::attrFloat(n, "alpha", 0.2f), ir::attrFloat(n, "beta", 0.5f)};
    return m;
  }
  if (n.opType == "Clip") {
    auto bounds = clipBounds(g, n);
    if (!bounds) return std::nullopt;
    m.params = *bounds;
    return m;
  }
  return std::nullopt;
}

// x * Sigmoid(x): x is read by exactly a Sigmoid and a Mul, and the Mul also reads the Sigmoid.
std::optional<ActivationMatch> silu(const ir::Graph& g,
                                    const std::vector<std::vector<int>>& consumers, int x) {
  const auto& readers = consumers[static_cast<size_t>(x)];
  if (readers.size() != 2 || isGraphOutput(g, x)) return std::nullopt;
  for (int k = 0; k < 2; ++k) {
    const int sigIndex = readers[k], mulIndex = readers[1 - k];
    const ir::Node& sig = g.nodes[static_cast<size_t>(sigIndex)];
    const ir::Node& mul = g.nodes[static_cast<size_t>(mulIndex)];
    if (!isOp(sig, "Sigmoid") || !isOp(mul, "Mul") || sig.outputs.size() != 1) continue;
    if (otherInput(mul, x) != sig.outputs[0] || !onlyReadBy(g, consumers, sig.outputs[0])) continue;
    return ActivationMatch{"SiLU", {}, {sigIndex, mulIndex}, mul.outputs[0]};
  }
  return std::nullopt;
}

// x * HardSigmoid(x) with alpha 1/6 and beta 1/2 is HardSwish(x): torch exports nn.Hardswish so
// before opset 14, where ONNX has no HardSwish.
std::optional<ActivationMatch> hardSwish(const ir::Graph& g,
                                         const std::vector<std::vector<int>>& consumers, int x) {
  const auto& readers = consumers[static_cast<size_t>(x)];
  if (readers.size() != 2 || isGraphOutput(g, x)) return std::nullopt;
  for (int k = 0; k < 2; ++k) {
    const int hsIndex = readers[k], mulIndex = readers[1 - k];
    const ir::Node& hs = g.nodes[static_cast<size_t>(hsIndex)];
    const ir::Node& mul = g.nodes[static_cast<size_t>(mulIndex)];
    if (!isOp(hs, "HardSigmoid") || !isOp(mul, "Mul") || hs.outputs.size() != 1) continue;
    if (!nearly(ir::attrFloat(hs, "alpha", 0.2f), 1.0f / 6.0f) ||
        !nearly(ir::attrFloat(hs, "beta", 0.5f), 0.5f))
      continue;
    if (otherInput(mul, x) != hs.outputs[0] || !onlyReadBy(g, consumers, hs.outputs[0])) continue;
    return ActivationMatch{"HardSwish", {}, {hsIndex, mulIndex}, mul.outputs[0]};
  }
  return std::nullopt;
}

// Mul(Mul(x, Add(Erf(Div(x, sqrt2)), 1)), 0.5), as torch 1.13 exports nn.GELU().
std::optional<ActivationMatch> gelu(const ir::Graph& g,
                                    const std::vector<std::vector<int>>& consumers, int x) {
  const auto& readers = consumers[static_cast<size_t>(x)];
  if (readers.size() != 2 || isGraphOutput(g, x)) return std::nullopt;
  for (int k = 0; k < 2; ++k) {
    const int divIndex = readers[k], mulIndex = readers[1 - k];
    const ir::Node& div = g.nodes[static_cast<size_t>(divIndex)];
    const ir::Node& mul = g.nodes[static_cast<size_t>(mulIndex)];
    if (!isOp(div, "Div") || !isOp(mul, "Mul") || div.inputs.size() != 2 || div.inputs[0] != x)
      continue;
    if (!nearly(scalarConstant(g, div.inputs[1]), 1.41421356f)) continue;
    int erfIndex = -1, addIndex = -1, halfIndex = -1;
    const ir::Node* erf = soleReader(g, consumers, div.outputs[0], &erfIndex);
    if (!erf || !isOp(*erf, "Erf")) continue;
    const ir::Node* add = soleReader(g, consumers, erf->outputs[0], &addIndex);
    if (!add || !isOp(*add, "Add") ||
        !nearly(scalarConstant(g, otherInput(*add, erf->outputs[0])), 1.0f))
      continue;
    if (otherInput(mul, x) != add->outputs[0] || !onlyReadBy(g, consumers, add->outputs[0]))
      continue;
    const ir::Node* half = soleReader(g, consumers, mul.outputs[0], &halfIndex);
    if (!half || !isOp(*half, "Mul") ||
        !nearly(scalarConstant(g, otherInput(*half, mul.outputs[0])), 0.5f))
      continue;
    return ActivationMatch{
        "Gelu", {}, {divIndex, erfIndex, addIndex, mulIndex, halfIndex}, half->outputs[0]};
  }
  return std::nullopt;
}

}  // namespace

std::optional<ActivationMatch> matchActivation(const ir::Graph& graph,
                                               const std::vector<std::vector<int>>& consumers,
                                               int value) {
  if (auto m = silu(graph, consumers, value)) return m;
  if (auto m = hardSwish(graph, consumers, value)) return m;
  if (auto m = gelu(graph, consumers, value)) return m;
  int index = -1;
  if (!soleReader(graph, consumers, value, &index)) return std::nullopt;
  const ir::Node& n = graph.nodes[static_cast<size_t>(index)];
  if (n.inputs.empty() || n.inputs[0] != value) return std::nullopt;
  return singleOp(graph, index);
}

bool absorbActivation(const ir::Graph& graph, const std::vector<std::vector<int>>& consumers,
                      std::vector<bool>& removed, ir::Node& fused, int* value) {
  auto act = matchActivation(graph, consumers, *value);
  if (!act || removed[static_cast<size_t>(act->nodes[0])]) return false;
  fused.attrs["activation"] = act->name;
  if (!act->params.empty()) fused.attrs["activation_params"] = act->params;
  for (int k : act->nodes) {
    recordFusion(fused, graph.nodes[static_cast<size_t>(k)]);
    removed[static_cast<size_t>(k)] = true;
  }
  *value = act->output;
  return true;
}

}  // namespace kiln::opt
