#include "build/quantization_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "ir/node_attrs.h"
#include "ir/op_schema.h"
#include "ir/precision.h"
#include "kiln/error.h"

namespace kiln::build {

namespace {

// ONNX opset of the inserted QuantizeLinear/DequantizeLinear nodes: the first with per-axis scales.
constexpr int64_t kQdqOpset = 13;

bool isFloat(const ir::Graph& g, int id) {
  return id != ir::kNoValue && g.value(id).type.dtype == DataType::kFloat32;
}

bool isConstant(const ir::Graph& g, int id) { return g.value(id).constant.has_value(); }

int64_t rankOf(const ir::Graph& g, int id) {
  const ir::Value& v = g.value(id);
  return v.constant     ? static_cast<int64_t>(v.constant->rank())
         : v.type.shape ? static_cast<int64_t>(v.type.shape->size())
                        : -1;
}

bool readsDequantize(const ir::Graph& g, const ir::Node& node) {
  for (int id : node.inputs) {
    if (id == ir::kNoValue || g.value(id).producer < 0) continue;
    if (g.nodes[static_cast<size_t>(g.value(id).producer)].opType == "DequantizeLinear")
      return true;
  }
  return false;
}

// Why the node cannot be quantized ("" when it can); fills its weights and activation inputs.
std::string examine(const ir::Graph& g, const ir::Node& node, QuantizedNode& target,
                    std::vector<int>& activations) {
  if (node.inputs.size() < 2) return "it has fewer than two inputs";
  const int a = node.inputs[0], b = node.inputs[1];
  if (!isFloat(g, a) || !isFloat(g, b)) return "its inputs are not float32";
  if (readsDequantize(g, node))
    return "it already reads a DequantizeLinear (explicit quantization)";
  if (isConstant(g, a)) return "its first input is a constant";
  activations.push_back(a);
  if (node.opType == "Conv") {
    if (!isConstant(g, b)) return "its weights are not a constant";
    target.weights.push_back({1, b, 0});
  } else if (node.opType == "Gemm") {
    if (isConstant(g, b))
      target.weights.push_back({1, b, ir::attrInt(node, "transB", 0) ? 0 : 1});
    else
      activations.push_back(b);
  } else if (isConstant(g, b)) {  // MatMul: the weights' last axis is the output channel
    if (rankOf(g, b) < 2) return "its constant B has rank < 2";
    target.weights.push_back({1, b, rankOf(g, b) - 1});
  } else {
    activations.push_back(b);
  }
  return "";
}

// The nodes (index, input slot) that read value `id`.
std::vector<std::pair<int, int>> readersOf(const ir::Graph& g, int id) {
  std::vector<std::pair<int, int>> readers;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const ir::Node& node = g.nodes[n];
    for (size_t s = 0; s < node.numExplicitInputs(); ++s)
      if (node.inputs[s] == id) readers.emplace_back(static_cast<int>(n), static_cast<int>(s));
  }
  return readers;
}

bool isGraphOutput(const ir::Graph& g, int id) {
  return std::find(g.outputs.begin(), g.outputs.end(), id) != g.outputs.end();
}

// The tensor quantized after a quantized node's output: a Relu's output when a Relu alone reads it
// (the Relu's range is the one worth the 8 bits), else the output itself; none (kNoValue) when no
// node reads it (a graph output stays float).
int quantizedOutput(const ir::Graph& g, int out) {
  const auto readers = readersOf(g, out);
  if (readers.empty()) return ir::kNoValue;
  if (readers.size() != 1 || isGraphOutput(g, out)) return out;
  const ir::Node& reader = g.nodes[static_cast<size_t>(readers[0].first)];
  if (reader.opType != "Relu" || !reader.domain.empty()) return out;
  return reader.outputs[0];
}

std::string uniqueName(const std::string& base, const ir::Graph& g, std::set<std::string>& taken) {
  std::string name = base;
  for (int k = 1; g.findValue(name) != ir::kNoValue || taken.count(name); ++k)
    name = base + "_" + std::to_string(k);
  taken.insert(name);
  return name;
}

uint64_t fnv1a(uint64_t hash, const std::string& text) {
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return (hash ^ 0xff) * 1099511628211ull;  // a separator, so that "ab"+"c" differs from "a"+"bc"
}

// Symmetric int8 quantization of a float weight, per channel along `axis` or per tensor (-1).
void quantizeWeights(const Tensor& w, int64_t axis, QdqPair& pair) {
  const Shape& shape = w.shape();
  const int64_t channels = axis < 0 ? 1 : shape[static_cast<size_t>(axis)];
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis + 1); axis >= 0 && d < shape.size(); ++d)
    inner *= shape[d];
  if (axis < 0) inner = w.numel();
  const float* src = w.data<float>();
  auto channelOf = [&](int64_t i) { return axis < 0 ? 0 : (i / inner) % channels; };
  std::vector<float> absMax(static_cast<size_t>(channels), 0.0f);
  for (int64_t i = 0; i < w.numel(); ++i) {
    float& m = absMax[static_cast<size_t>(channelOf(i))];
    m = std::max(m, std::abs(src[i]));
  }
  pair.scales.resize(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const float m = absMax[static_cast<size_t>(c)];
    pair.scales[static_cast<size_t>(c)] = m > 0 && std::isfinite(m) ? m / 127.0f : 1.0f;
  }
  pair.zeroPoints.assign(static_cast<size_t>(channels), 0);
  pair.weights = Tensor(DataType::kInt8, shape);
  int8_t* dst = pair.weights.data<int8_t>();
  for (int64_t i = 0; i < w.numel(); ++i) {
    const double q = std::nearbyint(static_cast<double>(src[i]) /
                                    pair.scales[static_cast<size_t>(channelOf(i))]);
    dst[i] = static_cast<int8_t>(std::clamp(q, -127.0, 127.0));
  }
  pair.axis = axis;
}

Tensor parameterTensor(const std::vector<float>& values, bool perAxis) {
  return Tensor::fromVector(DataType::kFloat32,
                            perAxis ? Shape{static_cast<int64_t>(values.size())} : Shape{}, values);
}

Tensor parameterTensor(const std::vector<int8_t>& values, bool perAxis) {
  return Tensor::fromVector(DataType::kInt8,
                            perAxis ? Shape{static_cast<int64_t>(values.size())} : Shape{}, values);
}

}  // namespace

QuantizationTargets findQuantizationTargets(const ir::Graph& g, const QuantizeOptions& options) {
  QuantizationTargets targets;
  std::set<int> activations;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const ir::Node& node = g.nodes[n];
    if (!node.domain.empty() ||
        (node.opType != "Conv" && node.opType != "MatMul" && node.opType != "Gemm"))
      continue;
    std::string why;
    QuantizedNode target;
    target.node = static_cast<int>(n);
    std::vector<int> inputs;
    if (options.excludeNodes.count(node.name)) {
      why = "excluded";
    } else if (ir::attrString(node, ir::kPrecisionAttr, "") == ir::kPrecisionFp32) {
      why = "pinned to fp32";
    } else {
      why = examine(g, node, target, inputs);
    }
    if (!why.empty()) {
      targets.skipped.push_back(node.label() + ": " + why);
      continue;
    }
    activations.insert(inputs.begin(), inputs.end());
    if (isFloat(g, node.outputs[0])) {
      const int out = quantizedOutput(g, node.outputs[0]);
      if (out != ir::kNoValue && !readersOf(g, out).empty()) activations.insert(out);
    }
    targets.nodes.push_back(std::move(target));
  }
  // In graph order: inputs first, then each node's outputs.
  for (int id : g.inputs)
    if (activations.count(id)) targets.activations.push_back(id);
  for (const ir::Node& node : g.nodes)
    for (int id : node.outputs)
      if (id != ir::kNoValue && activations.count(id)) targets.activations.push_back(id);
  return targets;
}

std::string networkFingerprint(const ir::Graph& g, const QuantizationTargets& targets) {
  uint64_t hash = 14695981039346656037ull;
  for (const QuantizedNode& t : targets.nodes) {
    hash = fnv1a(hash, g.nodes[static_cast<size_t>(t.node)].name);
    hash = fnv1a(hash, g.nodes[static_cast<size_t>(t.node)].opType);
  }
  for (int id : targets.activations) {
    const ir::Value& v = g.value(id);
    hash = fnv1a(hash, v.name);
    hash = fnv1a(hash, v.type.shape ? ir::symShapeToString(*v.type.shape) : "?");
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

QuantizationPlan makeQuantizationPlan(const ir::Graph& g, const QuantizationTargets& targets,
                                      const std::vector<ActivationQuantization>& activations,
                                      const QuantizeOptions& options) {
  if (activations.size() != targets.activations.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                "quantization plan: " + std::to_string(activations.size()) +
                    " activation scales for " + std::to_string(targets.activations.size()) +
                    " activations");
  }
  QuantizationPlan plan;
  std::set<std::string> taken;
  for (const ir::Node& node : g.nodes) taken.insert(node.name);
  auto names = [&](QdqPair& pair, bool weight) {
    pair.quantized = uniqueName(pair.tensor + "_quantized", g, taken);
    pair.dequantized = uniqueName(pair.tensor + "_dequantized", g, taken);
    pair.scaleName = uniqueName(pair.tensor + "_scale", g, taken);
    pair.zeroPointName = uniqueName(pair.tensor + "_zero_point", g, taken);
    if (!weight) pair.quantizeNode = uniqueName(pair.tensor + "_QuantizeLinear", g, taken);
    pair.dequantizeNode = uniqueName(pair.tensor + "_DequantizeLinear", g, taken);
  };
  for (size_t k = 0; k < activations.size(); ++k) {
    const int id = targets.activations[k];
    const ActivationQuantization& a = activations[k];
    if (a.tensor != g.value(id).name) {
      throw Error(ErrorCode::kInvalidArgument, "quantization plan: activation " +
                                                   std::to_string(k) + " is '" + g.value(id).name +
                                                   "', its scale is for '" + a.tensor + "'");
    }
    if (!(a.scale > 0) || !std::isfinite(a.scale)) {
      throw Error(ErrorCode::kInvalidArgument, "tensor '" + a.tensor + "': scale " +
                                                   std::to_string(a.scale) +
                                                   " is not a positive number");
    }
    QdqPair pair;
    pair.tensor = a.tensor;
    names(pair, false);
    pair.scales = {a.scale};
    pair.zeroPoints = {static_cast<int8_t>(std::clamp(a.zeroPoint, -128, 127))};
    for (const auto& [n, slot] : readersOf(g, id))
      pair.consumers.emplace_back(g.nodes[static_cast<size_t>(n)].name, slot);
    plan.pairs.push_back(std::move(pair));
  }
  std::map<std::pair<int, int64_t>, size_t> weightPairs;  // (value id, axis) -> index in plan.pairs
  for (const QuantizedNode& t : targets.nodes) {
    const ir::Node& node = g.nodes[static_cast<size_t>(t.node)];
    plan.nodes.push_back(node.name);
    for (const QuantizedNode::Weight& w : t.weights) {
      const int64_t axis = options.perChannel ? w.axis : -1;
      auto [it, added] = weightPairs.emplace(std::make_pair(w.value, axis), plan.pairs.size());
      if (added) {
        QdqPair pair;
        pair.tensor = g.value(w.value).name;
        names(pair, true);
        quantizeWeights(*g.value(w.value).constant, axis, pair);
        plan.pairs.push_back(std::move(pair));
      }
      plan.pairs[it->second].consumers.emplace_back(node.name, w.slot);
    }
  }
  return plan;
}

void applyQuantizationPlan(const QuantizationPlan& plan, ir::Graph& g) {
  std::map<std::string, size_t> nodeIndex;
  for (size_t n = 0; n < g.nodes.size(); ++n) nodeIndex[g.nodes[n].name] = n;
  for (const QdqPair& pair : plan.pairs) {
    const int source = g.findValue(pair.tensor);
    if (source == ir::kNoValue)
      throw Error(ErrorCode::kInvalidArgument,
                  "quantization plan: no tensor '" + pair.tensor + "'");
    const bool perAxis = pair.axis >= 0;
    const ir::TypeInfo type = g.value(source).type;
    const int scale = g.addValue(pair.scaleName, {DataType::kFloat32, {}});
    g.value(scale).constant = parameterTensor(pair.scales, perAxis);
    const int zeroPoint = g.addValue(pair.zeroPointName, {DataType::kInt8, {}});
    g.value(zeroPoint).constant = parameterTensor(pair.zeroPoints, perAxis);
    for (int id : {scale, zeroPoint})
      g.value(id).type.shape = ir::symShapeOf(g.value(id).constant->shape());
    const int quantized = g.addValue(pair.quantized, {DataType::kInt8, type.shape});
    auto addNode = [&](const char* op, const std::string& name, int in, int out) {
      ir::Node node;
      node.name = name;
      node.opType = op;
      node.opset = kQdqOpset;
      node.inputs = {in, scale, zeroPoint};
      node.outputs = {out};
      if (perAxis) node.attrs["axis"] = pair.axis;
      g.nodes.push_back(std::move(node));
    };
    if (pair.weights.defined())
      g.value(quantized).constant = pair.weights;
    else
      addNode("QuantizeLinear", pair.quantizeNode, source, quantized);
    const int dequantized = g.addValue(pair.dequantized, {DataType::kFloat32, type.shape});
    addNode("DequantizeLinear", pair.dequantizeNode, quantized, dequantized);
    for (const auto& [name, slot] : pair.consumers) {
      auto it = nodeIndex.find(name);
      if (it == nodeIndex.end())
        throw Error(ErrorCode::kInvalidArgument, "quantization plan: no node '" + name + "'");
      g.nodes[it->second].inputs.at(static_cast<size_t>(slot)) = dequantized;
    }
  }
  ir::sortTopologically(g);
  ir::inferShapes(g);
}

}  // namespace kiln::build
