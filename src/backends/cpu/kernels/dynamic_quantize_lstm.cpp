// CPU kernel of com.microsoft DynamicQuantizeLSTM (ir/ops/contrib_rnn.cpp): the LSTM recurrence
// (lstm_recurrence.h) with 8-bit weights, multiplied as ONNX Runtime does. Each product's float
// operand is quantized to uint8 at run time as DynamicQuantizeLinear does: X once, all time steps
// together; the hidden state once per step, all batch entries together. The int32 sums
// (x_q - x_zp)(w - w_zp[j]) are exact; gates get float(sum) * (x_scale * w_scale[j]).
#include "backends/cpu/kernels/lstm_recurrence.h"
#include "backends/cpu/kernels/qgemm_op_support.h"
#include "backends/cpu/kernels/quantize_dynamic.h"

namespace kiln::cpu {
namespace {

using namespace rnn;

// One direction's weights: [rows, 4 * hidden] minus their zero points, and their scales (1 or 4 *
// hidden).
struct QuantizedWeights {
  std::vector<int32_t> values;
  std::vector<float> scales;
};

// Input `input` (W or R) with its scale and zero point at `scaleInput` and scaleInput + 1.
QuantizedWeights loadWeights(const KernelContext& ctx, size_t input, size_t scaleInput,
                             const char* name, int64_t d, int64_t rows, int64_t n) {
  const Tensor& w = ctx.input(input);
  const std::string prefix(name);
  const auto perDirection = [&](const Tensor& t, const std::string& what) {
    if (t.numel() == ctx.input(input).dim(0)) return int64_t{1};
    if (t.numel() == ctx.input(input).dim(0) * n) return n;
    ctx.fail(what + " must hold one value per direction or [directions, " + std::to_string(n) +
                 "], got " + t.describe(),
             ErrorCode::kInvalidArgument);
  };
  const Tensor& scale = ctx.input(scaleInput);
  QuantizedWeights q;
  const int64_t scales = perDirection(scale, prefix + "_scale");
  const float* s = scale.data<float>() + d * scales;
  q.scales.assign(s, s + scales);
  std::vector<int32_t> zeroPoints(1, 0);
  if (ctx.hasInput(scaleInput + 1)) {
    const Tensor& zp = ctx.input(scaleInput + 1);
    const int64_t count = perDirection(zp, prefix + "_zero_point");
    zeroPoints.resize(static_cast<size_t>(count));
    for (int64_t j = 0; j < count; ++j)
      zeroPoints[static_cast<size_t>(j)] = zeroPointAt(zp, d * count + j);
  }
  q.values.resize(static_cast<size_t>(rows * n));
  const int64_t offset = d * rows * n;
  for (int64_t i = 0; i < rows * n; ++i) {
    const int32_t zp = zeroPoints[zeroPoints.size() == 1 ? 0 : static_cast<size_t>(i % n)];
    q.values[static_cast<size_t>(i)] = zeroPointAt(w, offset + i) - zp;
  }
  return q;
}

// v[0, count) quantized with q, minus the zero point.
std::vector<int32_t> quantizeWith(const float* v, int64_t count, const DynamicUint8& q) {
  std::vector<uint8_t> quantized(static_cast<size_t>(count));
  quantizeDynamicUint8(v, count, q, quantized.data());
  std::vector<int32_t> out(quantized.begin(), quantized.end());
  for (int32_t& x : out) x -= q.zeroPoint;
  return out;
}

// gates[j] += float(sum_k a[k] * w[k, j]) * (aScale * w.scales[j]).
void addScaledProduct(const int32_t* a, int64_t depth, const QuantizedWeights& w, float aScale,
                      int64_t n, std::vector<int32_t>& sums, float* gates) {
  std::fill(sums.begin(), sums.end(), 0);
  addVectorTimesMatrix(a, depth, w.values.data(), n, n, sums.data());
  for (int64_t j = 0; j < n; ++j) {
    const float multiplier = aScale * w.scales[w.scales.size() == 1 ? 0 : static_cast<size_t>(j)];
    gates[j] += static_cast<float>(sums[static_cast<size_t>(j)]) * multiplier;
  }
}

class QuantizedLstmProducts {
 public:
  QuantizedLstmProducts(KernelContext& ctx, const RecurrentDims& dims) : ctx_(ctx), dims_(dims) {
    sums_.resize(static_cast<size_t>(4 * dims.hidden));
  }
  static constexpr bool kEntriesInParallel = false;  // addRecurrent sums into sums_
  void setDirection(int64_t d) {
    w_ = loadWeights(ctx_, 1, 8, "W", d, dims_.input, 4 * dims_.hidden);
    r_ = loadWeights(ctx_, 2, 10, "R", d, dims_.hidden, 4 * dims_.hidden);
  }
  const float* projectInputs(const std::vector<float>& bias) {
    const int64_t rows = dims_.seq * dims_.batch, n = 4 * dims_.hidden;
    const float* xf = ctx_.input(0).data<float>();
    const DynamicUint8 q = chooseDynamicUint8(xf, rows * dims_.input);
    const std::vector<int32_t> x = quantizeWith(xf, rows * dims_.input, q);
    const float xScale = q.scale;
    xw_.resize(static_cast<size_t>(rows * n));
    for (int64_t r = 0; r < rows; ++r) {
      float* o = &xw_[static_cast<size_t>(r * n)];
      std::copy(bias.begin(), bias.end(), o);
      addScaledProduct(&x[static_cast<size_t>(r * dims_.input)], dims_.input, w_, xScale, n, sums_,
                       o);
    }
    return xw_.data();
  }
  // The range is that of the entries the step computes (ONNX Runtime's finished entries hold 0).
  void stepBegins(const std::vector<float>& hState, const std::vector<bool>& active) {
    const int64_t h = dims_.hidden;
    activeStates_.clear();
    for (size_t b = 0; b < active.size(); ++b) {
      if (active[b])
        activeStates_.insert(activeStates_.end(), hState.begin() + b * h,
                             hState.begin() + (b + 1) * h);
    }
    const DynamicUint8 q =
        chooseDynamicUint8(activeStates_.data(), static_cast<int64_t>(activeStates_.size()));
    h_ = quantizeWith(hState.data(), static_cast<int64_t>(hState.size()), q);
    hScale_ = q.scale;
  }
  void addRecurrent(int64_t b, const float*, float* gates) {
    addScaledProduct(&h_[static_cast<size_t>(b * dims_.hidden)], dims_.hidden, r_, hScale_,
                     4 * dims_.hidden, sums_, gates);
  }

 private:
  KernelContext& ctx_;
  const RecurrentDims& dims_;
  QuantizedWeights w_, r_;
  std::vector<int32_t> h_, sums_;    // the step's quantized hidden state; one product's sums
  std::vector<float> activeStates_;  // the hidden states of the step's entries
  std::vector<float> xw_;            // the input projection
  float hScale_ = 1.0f;
};

RecurrentDims quantizedLstmDims(const KernelContext& ctx, const RecurrentAttrs& attrs) {
  const Shape& x = ctx.input(0).shape();
  const Shape& r = ctx.input(2).shape();
  if (x.size() != 3 || r.size() != 3)
    ctx.fail("X and R must have rank 3, got " + shapeToString(x) + " and " + shapeToString(r));
  RecurrentDims dims;
  dims.directions = attrs.directions;
  dims.seq = x[0];
  dims.batch = x[1];
  dims.input = x[2];
  dims.hidden = r[1];
  const Shape w = {dims.directions, dims.input, 4 * dims.hidden};
  const Shape rExpected = {dims.directions, dims.hidden, 4 * dims.hidden};
  if (ctx.input(1).shape() != w)
    ctx.fail("W has shape " + shapeToString(ctx.input(1).shape()) + ", expected " +
             shapeToString(w));
  if (r != rExpected)
    ctx.fail("R has shape " + shapeToString(r) + ", expected " + shapeToString(rExpected));
  return dims;
}

KernelFn makeDynamicQuantizeLstmKernel(const KernelCreateInfo& info) {
  const RecurrentAttrs attrs = parseRecurrentAttrs(info.node, {"Sigmoid", "Tanh", "Tanh"});
  const bool inputForget = ir::attrInt(info.node, "input_forget", 0) != 0;
  return [attrs, inputForget](KernelContext& ctx) {
    const RecurrentDims dims = quantizedLstmDims(ctx, attrs);
    QuantizedLstmProducts products(ctx, dims);
    runLstmRecurrence<float, float>(ctx, attrs, inputForget, dims, products);
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "DynamicQuantizeLSTM",
                                KernelFactory(makeDynamicQuantizeLstmKernel));

}  // namespace kiln::cpu
