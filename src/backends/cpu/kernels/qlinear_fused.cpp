// Reference CPU kernels of kiln::QConv and kiln::QGemm (ir/ops/quantized_fused.cpp): the int32
// sums of ConvInteger / MatMulInteger (IntegerStage), then one output stage: bias, the real scale
// of each output channel, the fused activation, and requantization (or float32 output).
// Without an activation, or with Relu / Clip, the output is requantized exactly as QLinearConv
// does (sum times the float multiplier x_scale * w_scale / y_scale), Relu and Clip becoming
// bounds on the quantized value (quantization is monotonic, so clamping before or after it is the
// same); any other activation is applied to the real value in float32 before it is quantized.
#include <algorithm>
#include <optional>

#include "backends/cpu/activation.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/channels_last.h"
#include "backends/cpu/kernels/qlinear_integer.h"
#include "backends/cpu/kernels/quantize_math.h"
#include "ir/node_attrs.h"

namespace kiln::cpu {
namespace {

// How the int32 sums of one node become its output.
struct OutputStage {
  std::vector<double> realScale;   // per output channel: x_scale * w_scale (* alpha), in float
  std::vector<double> multiplier;  // realScale / y_scale, in float
  Activation act;
  bool quantized = false;
  double yScale = 1.0, yZeroPoint = 0.0;
};

OutputStage outputStage(const KernelContext& ctx, double xScale, const std::vector<double>& wScale,
                        double alpha, size_t yScaleInput, const Activation& act) {
  OutputStage s;
  s.act = act;
  s.quantized = ctx.hasInput(yScaleInput);
  if (s.quantized) {
    s.yScale = roundTo<float>(qlinearParams(ctx, yScaleInput, "y_scale", 1)[0]);
    s.yZeroPoint = qlinearParams(ctx, yScaleInput + 1, "y_zero_point", 1)[0];
  }
  for (double w : wScale) {
    double real = roundTo<float>(roundTo<float>(xScale) * roundTo<float>(w));
    if (alpha != 1.0) real = roundTo<float>(real * roundTo<float>(alpha));
    s.realScale.push_back(real);
    s.multiplier.push_back(roundTo<float>(real / s.yScale));
  }
  return s;
}

// The bounds Relu / Clip put on the quantized output.
template <typename Q>
std::pair<Q, Q> activationBounds(const OutputStage& s) {
  Q lo = std::numeric_limits<Q>::lowest(), hi = std::numeric_limits<Q>::max();
  if (s.act.kind == ActivationKind::kRelu) lo = static_cast<Q>(s.yZeroPoint);
  if (s.act.kind == ActivationKind::kClip) {
    lo = roundAndSaturate<Q>(s.act.alpha / s.yScale, s.yZeroPoint);
    hi = roundAndSaturate<Q>(s.act.beta / s.yScale, s.yZeroPoint);
  }
  return {lo, hi};
}

// Element k of the output belongs to channel (k / inner) % channels.
struct ChannelLayout {
  int64_t inner = 1, channels = 1;
  size_t channelOf(int64_t k) const { return static_cast<size_t>((k / inner) % channels); }
};

// The real values act((sum + bias) * realScale) in float32.
void realOutput(const int32_t* acc, const int32_t* bias, int64_t n, const ChannelLayout& layout,
                const OutputStage& s, float* out) {
  for (int64_t k = 0; k < n; ++k) {
    const size_t c = layout.channelOf(k);
    const double sum = static_cast<double>(acc[k]) + (bias ? bias[c] : 0);
    out[k] = static_cast<float>(sum * s.realScale[s.realScale.size() == 1 ? 0 : c]);
  }
  applyEpilogue(s.act, out, n, 0.0f, nullptr);
}

template <typename Q>
void requantize(const int32_t* acc, const int32_t* bias, int64_t n, const ChannelLayout& layout,
                const OutputStage& s, Q* out) {
  const ActivationKind kind = s.act.kind;
  if (kind == ActivationKind::kNone || kind == ActivationKind::kRelu ||
      kind == ActivationKind::kClip) {
    const auto [lo, hi] = activationBounds<Q>(s);
    for (int64_t k = 0; k < n; ++k) {
      const size_t c = layout.channelOf(k);
      const double sum = static_cast<double>(acc[k]) + (bias ? bias[c] : 0);
      out[k] = std::clamp(
          roundAndSaturate<Q>(sum * s.multiplier[s.multiplier.size() == 1 ? 0 : c], s.yZeroPoint),
          lo, hi);
    }
    return;
  }
  std::vector<float> real(static_cast<size_t>(n));
  realOutput(acc, bias, n, layout, s, real.data());
  for (int64_t k = 0; k < n; ++k)
    out[k] = roundAndSaturate<Q>(real[static_cast<size_t>(k)] / s.yScale, s.yZeroPoint);
}

void writeOutput(const Tensor& sums, const Tensor* bias, const ChannelLayout& layout,
                 const OutputStage& s, Tensor& y) {
  const int32_t* b = bias ? bias->data<int32_t>() : nullptr;
  if (!s.quantized)
    return realOutput(sums.data<int32_t>(), b, y.numel(), layout, s, y.data<float>());
  dispatchQuantized(y.dtype(), "quantized output", [&](auto tag) {
    using Q = typename decltype(tag)::type;
    requantize(sums.data<int32_t>(), b, y.numel(), layout, s, y.data<Q>());
  });
}

// The int32 bias input: absent, or one value per output channel.
const Tensor* biasInput(const KernelContext& ctx, size_t input, const char* name,
                        int64_t channels) {
  if (!ctx.hasInput(input)) return nullptr;
  const Tensor& bias = ctx.input(input);
  if (bias.dtype() != DataType::kInt32 || bias.rank() != 1 || bias.numel() != channels) {
    ctx.fail(std::string(name) + " (input " + std::to_string(input) +
                 ") must be int32 with one value per output channel (" + std::to_string(channels) +
                 "), got " + bias.describe(),
             ErrorCode::kInvalidArgument);
  }
  return &bias;
}

// channels_last = 1 (opt/nhwc_int8_layout.cpp): X and Y are [N, H, W, C]; the integer stage
// runs on X moved to channels-first and its sums are moved back.
Kernel makeQConvKernel(const KernelCreateInfo& info) {
  const bool channelsLast = ir::attrInt(info.node, "channels_last", 0) != 0;
  std::optional<ir::TypeInfo> xFirst;
  const ir::TypeInfo* x = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  if (channelsLast && x && x->shape && x->shape->size() >= 2) {
    xFirst = *x;
    std::rotate(xFirst->shape->begin() + 1, xFirst->shape->end() - 1, xFirst->shape->end());
  }
  // X, W, x_zero_point, w_zero_point
  IntegerStage integer(info, "ConvInteger", {0, 3, 2, 5}, {xFirst ? &*xFirst : nullptr});
  const Activation act = fusedActivationOf(info.node);
  Kernel k;
  k.run = [integer, act, channelsLast](KernelContext& ctx) {
    const Tensor& w = ctx.input(3);
    const int64_t channels = w.rank() > 0 ? w.dim(0) : 1;
    const OutputStage stage = outputStage(ctx, qlinearParams(ctx, 1, "x_scale", 1)[0],
                                          qlinearParams(ctx, 4, "w_scale", channels), 1.0, 6, act);
    const Tensor* bias = biasInput(ctx, 8, "B", channels);
    Tensor& y = ctx.output(0);
    if (channelsLast) {
      const Tensor first = toChannelsFirst(ctx.input(0));
      const Tensor sums = toChannelsLast(integer.run(ctx, channelsFirstShape(y.shape()), 0, first));
      return writeOutput(sums, bias, ChannelLayout{1, channels}, stage, y);
    }
    const Tensor sums = integer.run(ctx, y.shape());
    const int64_t spatial =
        y.rank() > 2 ? shapeNumel(Shape(y.shape().begin() + 2, y.shape().end())) : 1;
    writeOutput(sums, bias, ChannelLayout{spatial, channels}, stage, y);
  };
  return k;
}

// B^T of a 2-D 8-bit constant.
Tensor transposed8Bit(const Tensor& b) {
  const int64_t rows = b.dim(0), cols = b.dim(1);
  Tensor t(b.dtype(), Shape{cols, rows});
  const uint8_t* src = b.data<uint8_t>();
  uint8_t* dst = t.data<uint8_t>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
  return t;
}

Kernel makeQGemmKernel(const KernelCreateInfo& info) {
  IntegerStage integer(info, "MatMulInteger", {0, 3, 2, 5});  // A, B, a_zero_point, b_zero_point
  const Activation act = fusedActivationOf(info.node);
  const double alpha = ir::attrFloat(info.node, "alpha", 1.0f);
  if (ir::attrInt(info.node, "transA", 0) != 0)
    ir::failNode(info.node, "transA must be 0", ErrorCode::kUnsupportedNode);
  const bool transB = ir::attrInt(info.node, "transB", 0) != 0;
  const Tensor* b = info.constants.size() > 3 ? info.constants[3] : nullptr;
  if (!b || b->rank() != 2)
    ir::failNode(info.node, "B (input 3) must be a 2-D constant", ErrorCode::kUnsupportedNode);
  auto bT = std::make_shared<const Tensor>(transB ? transposed8Bit(*b) : Tensor());
  Kernel k;
  k.run = [integer, act, alpha, transB, bT](KernelContext& ctx) {
    const int64_t n = transB ? bT->dim(1) : ctx.input(3).dim(1);
    const OutputStage stage = outputStage(ctx, qlinearParams(ctx, 1, "a_scale", 1)[0],
                                          qlinearParams(ctx, 4, "b_scale", n), alpha, 7, act);
    const Tensor* bias = biasInput(ctx, 6, "C", n);
    Tensor& y = ctx.output(0);
    const Tensor sums = transB ? integer.run(ctx, y.shape(), 1, *bT) : integer.run(ctx, y.shape());
    writeOutput(sums, bias, ChannelLayout{1, n}, stage, y);
  };
  return k;
}

void addReference(const char* domain, const char* op, const char* id,
                  Kernel (*make)(const KernelCreateInfo&)) {
  KernelCandidate c;
  c.id = id;
  c.create = make;
  KernelRegistry::global().addCandidate(domain, op, DataType::kUndefined, std::move(c));
}

const bool kRegistered = [] {
  addReference("kiln", "QConv", "any_qconv_reference", makeQConvKernel);
  addReference("kiln", "QGemm", "any_qgemm_reference", makeQGemmKernel);
  addReference("com.microsoft", "QGemm", "any_ms_qgemm_reference", makeQGemmKernel);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
