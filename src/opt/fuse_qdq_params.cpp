#include "opt/fuse_qdq_params.h"

#include <cstring>

#include "ir/node_attrs.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {
namespace {

bool isEightBit(DataType t) { return t == DataType::kInt8 || t == DataType::kUint8; }

// The parameters of a DequantizeLinear or QuantizeLinear node whose quantized side is `quantized`.
std::optional<QuantParams> paramsOf(const ir::Graph& graph, int index, int quantized) {
  const ir::Node& n = graph.nodes[static_cast<size_t>(index)];
  if (n.inputs.size() < 2 || ir::attrInt(n, "block_size", 0) != 0) return std::nullopt;
  QuantParams p;
  p.node = index;
  p.quantized = quantized;
  p.scale = n.inputs[1];
  p.zeroPoint = n.inputs.size() > 2 ? n.inputs[2] : ir::kNoValue;
  p.type = graph.value(quantized).type.dtype;
  p.axis = ir::attrInt(n, "axis", 1);
  p.scaleValue = constantValue(graph, p.scale);
  p.zeroPointValue = constantValue(graph, p.zeroPoint);
  if (!isEightBit(p.type)) return std::nullopt;
  return p;
}

}  // namespace

std::optional<QuantParams> dequantizerOf(const ir::Graph& graph, int value) {
  if (value == ir::kNoValue) return std::nullopt;
  const int producer = graph.value(value).producer;
  if (producer < 0) return std::nullopt;
  const ir::Node& n = graph.nodes[static_cast<size_t>(producer)];
  if (!n.domain.empty() || n.opType != "DequantizeLinear" || n.inputs.empty()) return std::nullopt;
  return paramsOf(graph, producer, n.inputs[0]);
}

std::optional<QuantParams> asQuantizer(const ir::Graph& graph, int index) {
  const ir::Node& n = graph.nodes[static_cast<size_t>(index)];
  if (!n.domain.empty() || n.opType != "QuantizeLinear" || n.outputs.size() != 1)
    return std::nullopt;
  return paramsOf(graph, index, n.outputs[0]);
}

std::optional<QuantParams> soleQuantizerOf(const ir::Graph& graph,
                                           const std::vector<std::vector<int>>& consumers,
                                           const std::vector<bool>& removed, int value) {
  if (!onlyReadBy(graph, consumers, value)) return std::nullopt;
  const int reader = consumers[static_cast<size_t>(value)][0];
  if (removed[static_cast<size_t>(reader)]) return std::nullopt;
  auto q = asQuantizer(graph, reader);
  if (!q || !perTensorProblem(*q, "Q").empty()) return std::nullopt;
  return q;
}

std::string perTensorProblem(const QuantParams& p, const std::string& what) {
  if (!p.scaleValue) return what + " scale is not a constant";
  if (p.scaleValue->numel() != 1)
    return what + " scale is not a scalar (" + p.scaleValue->describe() + ")";
  if (p.scaleValue->dtype() != DataType::kFloat32)
    return what + " scale is " + dataTypeName(p.scaleValue->dtype()) + ", not float32";
  if (p.zeroPoint != ir::kNoValue && !p.zeroPointValue)
    return what + " zero point is not a constant";
  if (p.zeroPointValue && p.zeroPointValue->numel() != 1)
    return what + " zero point is not a scalar";
  return "";
}

double scaleOf(const QuantParams& p) { return p.scaleValue->data<float>()[0]; }

double zeroPointOf(const QuantParams& p, int64_t k) {
  if (!p.zeroPointValue) return 0.0;
  const int64_t i = p.zeroPointValue->numel() == 1 ? 0 : k;
  return p.zeroPointValue->dtype() == DataType::kInt8 ? p.zeroPointValue->data<int8_t>()[i]
                                                      : p.zeroPointValue->data<uint8_t>()[i];
}

bool sameParams(const QuantParams& a, const QuantParams& b) {
  if (a.type != b.type || !perTensorProblem(a, "a").empty() || !perTensorProblem(b, "b").empty())
    return false;
  const float sa = a.scaleValue->data<float>()[0], sb = b.scaleValue->data<float>()[0];
  return std::memcmp(&sa, &sb, sizeof(float)) == 0 && zeroPointOf(a, 0) == zeroPointOf(b, 0);
}

int zeroPointInput(ir::Graph& graph, const QuantParams& p) {
  if (p.zeroPoint != ir::kNoValue) return p.zeroPoint;
  Tensor zero(p.type, Shape{});
  std::memset(zero.data<uint8_t>(), 0, 1);
  return addConstant(graph, graph.value(p.quantized).name + "_zero_point", std::move(zero));
}

}  // namespace kiln::opt
