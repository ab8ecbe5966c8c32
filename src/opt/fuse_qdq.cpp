// DequantizeLinear(x) + DequantizeLinear(constant w) [+ bias] -> Conv / MatMul / Gemm
// [-> activation] [-> QuantizeLinear] ==> kiln::QConv / kiln::QGemm (ir/ops/quantized_fused.cpp),
// the patterns onnxruntime's QDQ transformer turns into QLinearConv / QGemm. The layer reads the
// int8 tensors the DQs read, so a Q -> DQ pair between two such layers disappears with the DQ.
// A layer whose output is not quantized (float ops read it) gets the float32-output form. A Conv,
// MatMul or Gemm of a QDQ model that stays float records why in kInt8RefusalAttr.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/node_attrs.h"
#include "opt/activation_match.h"
#include "opt/fuse_qdq_params.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {
namespace {

bool isOp(const ir::Node& n, const char* op) { return n.domain.empty() && n.opType == op; }

// What a Conv, MatMul or Gemm needs of its weight: constant 8-bit data, constant scale and zero
// point per tensor or per output channel (`channels` values along `axis`).
std::string weightProblem(const ir::Graph& g, const QuantParams& w, int64_t channels,
                          int64_t axis) {
  if (!constantValue(g, w.quantized))
    return "weight DQ not constant (its input is computed at run time)";
  if (!w.scaleValue || w.scaleValue->dtype() != DataType::kFloat32)
    return "weight scale is not a float32 constant";
  if (w.zeroPoint != ir::kNoValue && !w.zeroPointValue)
    return "weight zero point is not a constant";
  const int64_t n = w.scaleValue->numel();
  const int64_t rank = g.value(w.quantized).type.shape
                           ? static_cast<int64_t>(g.value(w.quantized).type.shape->size())
                           : 0;
  const int64_t wAxis = w.axis < 0 ? w.axis + rank : w.axis;
  if (n != 1 && (w.scaleValue->rank() != 1 || n != channels || wAxis != axis)) {
    return "weight scale is neither per tensor nor per output channel (axis " +
           std::to_string(axis) + ", " + std::to_string(channels) +
           " values): " + w.scaleValue->describe() + " on axis " + std::to_string(w.axis);
  }
  if (w.zeroPointValue && w.zeroPointValue->numel() != 1 && w.zeroPointValue->numel() != n) {
    return "weight zero point has " + std::to_string(w.zeroPointValue->numel()) + " values for " +
           std::to_string(n) + " scales";
  }
  return "";
}

// Element k of an int8, uint8 or int32 tensor; NaN for other types.
double integerAt(const Tensor& t, int64_t k) {
  switch (t.dtype()) {
    case DataType::kInt8:
      return t.data<int8_t>()[k];
    case DataType::kUint8:
      return t.data<uint8_t>()[k];
    case DataType::kInt32:
      return t.data<int32_t>()[k];
    default:
      return std::nan("");
  }
}

// A constant bias as real values (a float constant, or the DQ of an integer constant), or why
// not; *int32Data is the DQ's input when it is int32, *dq the DQ's parameters.
std::string biasValues(const ir::Graph& g, int value, std::vector<double>* real,
                       const Tensor** int32Data, std::optional<QuantParams>* dq) {
  if (const Tensor* t = constantValue(g, value); t && t->dtype() == DataType::kFloat32) {
    for (int64_t k = 0; k < t->numel(); ++k) real->push_back(t->data<float>()[k]);
    return "";
  }
  const int producer = g.value(value).producer;
  const ir::Node* n = producer >= 0 ? &g.nodes[static_cast<size_t>(producer)] : nullptr;
  if (!n || !isOp(*n, "DequantizeLinear") || n->inputs.size() < 2)
    return "bias is neither a constant nor a DQ of one";
  const Tensor* q = constantValue(g, n->inputs[0]);
  const Tensor* scale = constantValue(g, n->inputs[1]);
  const Tensor* zp = n->inputs.size() > 2 ? constantValue(g, n->inputs[2]) : nullptr;
  if (!q || !scale || scale->dtype() != DataType::kFloat32 ||
      (n->inputs.size() > 2 && n->inputs[2] != ir::kNoValue && !zp) ||
      ir::attrInt(*n, "block_size", 0) != 0 ||
      (scale->numel() != 1 && scale->numel() != q->numel())) {
    return "bias DQ is not of constants";
  }
  for (int64_t k = 0; k < q->numel(); ++k) {
    const float s = scale->data<float>()[scale->numel() == 1 ? 0 : k];
    const double z = zp ? integerAt(*zp, zp->numel() == 1 ? 0 : k) : 0.0;
    const double v = integerAt(*q, k);
    if (std::isnan(v) || std::isnan(z)) return "bias DQ is not of int8, uint8 or int32 constants";
    real->push_back((v - z) * s);
  }
  if (q->dtype() == DataType::kInt32) *int32Data = q;
  QuantParams p;
  p.node = producer;
  p.scaleValue = scale;
  p.zeroPointValue = zp;
  *dq = p;
  return "";
}

// What the matched op is: its output channels, where its weight and bias are, alpha and beta.
struct LayerKind {
  const char* fusedOp = "QConv";
  int64_t channels = 0;
  int64_t weightAxis = 0;
  int biasInput = ir::kNoValue;  // value id of the op's own bias input, if any
  double alpha = 1.0, beta = 1.0;
};

// One Conv / MatMul / Gemm being matched and, when everything fits, rewritten.
class LayerFusion {
 public:
  LayerFusion(ir::Graph& g, const std::vector<std::vector<int>>& consumers,
              std::vector<bool>& removed, size_t index)
      : g_(g), consumers_(consumers), removed_(removed), index_(index) {}

  /// "" when the layer can run as kiln::QConv / kiln::QGemm, else why not.
  std::string match() {
    const ir::Node& n = node();
    std::string problem = matchKind(n);
    if (!problem.empty()) return problem;
    const char* xName = isOp(n, "Conv") ? "input X" : "input A";
    const auto x = dequantizerOf(g_, n.inputs[0]);
    if (!x) return notDequantized(n.inputs[0], xName);
    x_ = *x;
    if (problem = perTensorProblem(x_, xName); !problem.empty()) return problem;
    const auto w = dequantizerOf(g_, n.inputs[1]);
    if (!w) return notDequantized(n.inputs[1], "weight");
    w_ = *w;
    if (problem = weightProblem(g_, w_, kind_.channels, kind_.weightAxis); !problem.empty())
      return problem;
    realScale_ = realScales(kind_.alpha);
    output_ = n.outputs[0];
    if (kind_.biasInput != ir::kNoValue) {
      if (problem = convertBias(kind_.biasInput, kind_.beta); !problem.empty()) return problem;
    } else if (isOp(n, "MatMul")) {
      foldBiasAdd();
    }
    matchOutput();
    return "";
  }

  /// Replaces the op by the quantized layer (call after match() returned "").
  void apply() {
    const ir::Node& op = node();
    ir::Node fused = op;
    fused.domain = "kiln";
    fused.opType = kind_.fusedOp;
    fused.opset = 1;
    fused.attrs.erase("beta");  // folded into the bias
    const int xZero = zeroPointInput(g_, x_), wZero = zeroPointInput(g_, w_);
    const int yScale = y_ ? y_->scale : ir::kNoValue,
              yZero = y_ ? zeroPointInput(g_, *y_) : ir::kNoValue;
    fused.inputs = {x_.quantized, x_.scale, xZero, w_.quantized, w_.scale, wZero};
    if (isOp(op, "Conv")) {
      fused.inputs.insert(fused.inputs.end(), {yScale, yZero, bias_});
    } else {
      fused.inputs.insert(fused.inputs.end(), {bias_, yScale, yZero});
    }
    while (fused.inputs.back() == ir::kNoValue) fused.inputs.pop_back();
    for (int dq : {x_.node, w_.node, biasDequantizer_}) {
      if (dq >= 0 && readOnlyByThisLayer(g_.nodes[static_cast<size_t>(dq)].outputs[0])) {
        recordFusion(fused, g_.nodes[static_cast<size_t>(dq)]);
      }
    }
    for (int k : absorbed_) {
      recordFusion(fused, g_.nodes[static_cast<size_t>(k)]);
      removed_[static_cast<size_t>(k)] = true;
    }
    if (act_ && keepActivation_) {
      fused.attrs["activation"] = act_->name;
      if (!act_->params.empty()) fused.attrs["activation_params"] = act_->params;
    }
    if (!floatOutputReason_.empty()) fused.attrs[kInt8FloatOutputAttr] = floatOutputReason_;
    fused.outputs = {y_ ? y_->quantized : output_};
    g_.nodes[index_] = std::move(fused);
  }

 private:
  const ir::Node& node() const { return g_.nodes[index_]; }

  const ir::TypeInfo& typeOf(int value) const { return g_.value(value).type; }

  // Why `value` is not the output of a DequantizeLinear the layer can read.
  std::string notDequantized(int value, const std::string& what) const {
    const int producer = g_.value(value).producer;
    if (producer < 0 || !isOp(g_.nodes[static_cast<size_t>(producer)], "DequantizeLinear")) {
      return what + " is not dequantized (no DequantizeLinear before it)";
    }
    const ir::Node& dq = g_.nodes[static_cast<size_t>(producer)];
    if (ir::attrInt(dq, "block_size", 0) != 0)
      return what + " is dequantized in blocks (block_size), not per tensor or channel";
    return what + " is dequantized from " + dataTypeName(typeOf(dq.inputs[0]).dtype) +
           ", not int8 or uint8";
  }

  std::string matchKind(const ir::Node& n) {
    if (n.inputs.size() < 2 || n.outputs.size() != 1) return "not a two-operand " + n.opType;
    const Tensor* w = nullptr;
    if (const auto dq = dequantizerOf(g_, n.inputs[1])) w = constantValue(g_, dq->quantized);
    if (isOp(n, "Conv")) {
      kind_.channels = w && w->rank() > 0 ? w->dim(0) : 0;
      kind_.biasInput = n.inputs.size() > 2 ? n.inputs[2] : ir::kNoValue;
      return "";
    }
    const auto& a = typeOf(n.inputs[0]).shape;
    if (!a || a->size() < 2) return "input A is not known to have rank 2 or more";
    kind_.fusedOp = "QGemm";
    kind_.weightAxis = 1;
    if (w && w->rank() != 2) return "weight is not 2-D";
    kind_.channels = w ? w->dim(1) : 0;
    if (isOp(n, "MatMul")) return "";
    if (ir::attrInt(n, "transA", 0) != 0)
      return "Gemm with transA = 1 is not fused (kiln::QGemm takes A as [M, K])";
    if (ir::attrInt(n, "transB", 0) != 0) {
      kind_.weightAxis = 0;
      kind_.channels = w ? w->dim(0) : 0;
    }
    kind_.alpha = ir::attrFloat(n, "alpha", 1.0f);
    kind_.beta = ir::attrFloat(n, "beta", 1.0f);
    kind_.biasInput = n.inputs.size() > 2 ? n.inputs[2] : ir::kNoValue;
    return "";
  }

  std::vector<double> realScales(double alpha) const {
    const float xs = x_.scaleValue->data<float>()[0];
    std::vector<double> out;
    for (int64_t k = 0; k < w_.scaleValue->numel(); ++k) {
      float s = xs * w_.scaleValue->data<float>()[k];
      if (alpha != 1.0) s *= static_cast<float>(alpha);
      out.push_back(s);
    }
    return out;
  }

  double realScale(int64_t channel) const {
    return realScale_[realScale_.size() == 1 ? 0 : static_cast<size_t>(channel)];
  }

  bool readOnlyByThisLayer(int value) const {
    if (isGraphOutput(g_, value)) return false;
    for (int reader : consumers_[static_cast<size_t>(value)]) {
      if (reader != static_cast<int>(index_) && !removed_[static_cast<size_t>(reader)] &&
          std::find(absorbed_.begin(), absorbed_.end(), reader) == absorbed_.end()) {
        return false;
      }
    }
    return true;
  }

  // The bias at the layer's accumulator scale as an int32 constant: the DQ's int32 values as
  // they are when its scale is exactly x_scale * w_scale (what onnxruntime's quantizer writes),
  // else the real values times beta rounded at that scale, as onnxruntime quantizes a float bias
  // (an error of at most half an accumulator step, far below one output step).
  std::string convertBias(int value, double beta) {
    std::vector<double> real;
    const Tensor* int32Data = nullptr;
    std::optional<QuantParams> dq;
    const std::string problem = biasValues(g_, value, &real, &int32Data, &dq);
    if (!problem.empty()) return problem;
    const int64_t channels = kind_.channels;
    if (static_cast<int64_t>(real.size()) != channels) {
      return "bias has " + std::to_string(real.size()) + " values, not one per output channel (" +
             std::to_string(channels) + ")";
    }
    bool exact = int32Data && beta == 1.0;
    for (int64_t k = 0; exact && k < channels; ++k) {
      exact =
          static_cast<float>(dq->scaleValue->data<float>()[dq->scaleValue->numel() == 1 ? 0 : k]) ==
              static_cast<float>(realScale(k)) &&
          (!dq->zeroPointValue ||
           integerAt(*dq->zeroPointValue, dq->zeroPointValue->numel() == 1 ? 0 : k) == 0);
    }
    Tensor bias(DataType::kInt32, Shape{channels});
    for (int64_t k = 0; k < channels; ++k) {
      const double q = exact ? int32Data->data<int32_t>()[k]
                             : std::nearbyint(beta * real[static_cast<size_t>(k)] / realScale(k));
      if (!(std::fabs(q) <= std::numeric_limits<int32_t>::max()))
        return "bias does not fit int32 at scale x_scale * w_scale";
      bias.data<int32_t>()[k] = static_cast<int32_t>(q);
    }
    bias_ = addConstant(g_, node().name + "_bias_int32", std::move(bias));
    if (dq) biasDequantizer_ = dq->node;
    return "";
  }

  // MatMul + Add(constant [N]) -> the layer's bias, when the Add alone reads the MatMul.
  void foldBiasAdd() {
    if (!onlyReadBy(g_, consumers_, output_)) return;
    const int addIndex = consumers_[static_cast<size_t>(output_)][0];
    const ir::Node& add = g_.nodes[static_cast<size_t>(addIndex)];
    if (removed_[static_cast<size_t>(addIndex)] || !isOp(add, "Add") || add.inputs.size() != 2 ||
        add.inputs[0] == add.inputs[1]) {
      return;
    }
    const int other = add.inputs[0] == output_ ? add.inputs[1] : add.inputs[0];
    const auto& shape = typeOf(other).shape;
    if (!shape || shape->size() != 1 || !sameKnownShape(g_, add.outputs[0], output_)) return;
    if (!convertBias(other, 1.0).empty()) return;
    absorbed_.push_back(addIndex);
    output_ = add.outputs[0];
  }

  // The activation and QuantizeLinear after the op, or why its output stays float32.
  void matchOutput() {
    act_ = matchActivation(g_, consumers_, output_);
    if (act_ && std::any_of(act_->nodes.begin(), act_->nodes.end(),
                            [&](int k) { return removed_[static_cast<size_t>(k)]; })) {
      act_ = std::nullopt;
    }
    const int after = act_ ? act_->output : output_;
    const std::string opName = node().opType;
    if (!onlyReadBy(g_, consumers_, after)) {
      floatOutputReason_ = isGraphOutput(g_, after)
                               ? "its result is a graph output"
                               : "its result is read by " +
                                     std::to_string(consumers_[static_cast<size_t>(after)].size()) +
                                     " nodes";
      return absorbActivation();
    }
    const int reader = consumers_[static_cast<size_t>(after)][0];
    const auto q = asQuantizer(g_, reader);
    if (!q || removed_[static_cast<size_t>(reader)]) {
      const ir::Node& r = g_.nodes[static_cast<size_t>(reader)];
      const bool thenQ = r.outputs.size() == 1 && onlyReadBy(g_, consumers_, r.outputs[0]) &&
                         asQuantizer(g_, consumers_[static_cast<size_t>(r.outputs[0])][0]);
      floatOutputReason_ =
          thenQ ? "activation between " + opName + " and Q is " + r.opType + ": not fused"
                : "its result is read by float ops (" + r.opType + ")";
      return absorbActivation();
    }
    const std::string problem = perTensorProblem(*q, "output Q");
    if (!problem.empty()) {
      floatOutputReason_ = problem;
      return absorbActivation();
    }
    absorbActivation();
    y_ = q;
    absorbed_.push_back(reader);
    if (act_ && saturationImplies(*act_)) keepActivation_ = false;
  }

  void absorbActivation() {
    if (!act_) return;
    absorbed_.insert(absorbed_.end(), act_->nodes.begin(), act_->nodes.end());
    if (!y_) output_ = act_->output;
  }

  // Whether quantizing at y already clamps to what Relu / Clip would (the activation is then
  // dropped).
  bool saturationImplies(const ActivationMatch& act) const {
    const double lowest = y_->type == DataType::kInt8 ? -128.0 : 0.0,
                 highest = y_->type == DataType::kInt8 ? 127.0 : 255.0;
    const double scale = scaleOf(*y_), zero = zeroPointOf(*y_, 0);
    if (act.name == "Relu") return zero == lowest;
    if (act.name != "Clip" || act.params.size() < 2) return false;
    return std::nearbyint(act.params[0] / scale) + zero <= lowest &&
           std::nearbyint(act.params[1] / scale) + zero >= highest;
  }

  ir::Graph& g_;
  const std::vector<std::vector<int>>& consumers_;
  std::vector<bool>& removed_;
  size_t index_;
  LayerKind kind_;
  QuantParams x_, w_;
  std::vector<double>
      realScale_;            // per output channel (or one): x_scale * w_scale * alpha, in float
  int bias_ = ir::kNoValue;  // int32 [channels] constant
  int biasDequantizer_ = -1;
  std::vector<int> absorbed_;     // nodes the layer replaces: bias Add, activation, Q
  int output_ = ir::kNoValue;     // the float value the layer computes (after bias and activation)
  std::optional<QuantParams> y_;  // the QuantizeLinear the layer writes through
  std::optional<ActivationMatch> act_;
  bool keepActivation_ = true;
  std::string floatOutputReason_;
};

bool hasQdqNodes(const ir::Graph& g) {
  for (const ir::Node& n : g.nodes) {
    if (isOp(n, "QuantizeLinear") || isOp(n, "DequantizeLinear")) return true;
  }
  return false;
}

}  // namespace

int fuseQdqLayers(ir::Graph& graph) {
  if (!hasQdqNodes(graph)) return 0;
  const auto consumers = consumersOf(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& n = graph.nodes[i];
    if (removed[i] || !(isOp(n, "Conv") || isOp(n, "MatMul") || isOp(n, "Gemm"))) continue;
    LayerFusion fusion(graph, consumers, removed, i);
    const std::string problem = fusion.match();
    if (problem.empty()) {
      fusion.apply();
    } else {
      graph.nodes[i].attrs[kInt8RefusalAttr] = problem;
    }
  }
  return dropNodes(graph, removed);
}

}  // namespace kiln::opt
