// CPU kernel for LSTM (the recurrence is lstm_recurrence.h): float W and R, multiplied in Acc;
// float32 through SGEMM.
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/kernels/lstm_recurrence.h"

namespace kiln::cpu {
namespace {

using namespace rnn;

// W and R as Acc, transposed once per direction: the products for double, one row at a time.
template <typename T, typename Acc>
class FloatLstmProducts {
 public:
  FloatLstmProducts(KernelContext& ctx, const RecurrentDims& dims) : ctx_(ctx), dims_(dims) {}
  void setDirection(int64_t d) { w_ = directionWeights<Acc, T>(ctx_, dims_, 4, d); }
  std::vector<Acc> projectInputs(const std::vector<Acc>& bias) const {
    return rnn::projectInputs<Acc>(ctx_.input(0).data<T>(), dims_, w_.wt, bias);
  }
  void stepBegins(const std::vector<Acc>&, const std::vector<bool>&) const {}
  void addRecurrent(int64_t, const Acc* h, Acc* gates) const {
    const int64_t n = 4 * dims_.hidden;
    addVectorTimesMatrix(h, dims_.hidden, w_.rt.data(), n, n, gates);
  }

 private:
  KernelContext& ctx_;
  const RecurrentDims& dims_;
  DirectionWeights<Acc> w_;
};

// float32: SGEMMs straight on the op's W and R (no transposed copies). The input projection of
// every step and batch entry is one product; each step multiplies the whole batch's hidden state
// by R^T at once, so R is read once per step, not once per batch entry.
template <>
class FloatLstmProducts<float, float> {
 public:
  FloatLstmProducts(KernelContext& ctx, const RecurrentDims& dims)
      : ctx_(ctx), dims_(dims), recurrent_(static_cast<size_t>(dims.batch * 4 * dims.hidden)) {}
  void setDirection(int64_t d) {
    const int64_t n = 4 * dims_.hidden;
    w_ = ctx_.input(1).data<float>() + d * n * dims_.input;
    r_ = ctx_.input(2).data<float>() + d * n * dims_.hidden;
    // Packed once per direction: a product with more than one row would pack R on every step.
    if (dims_.batch > 1) packedR_ = packB(true, dims_.hidden, n, r_, dims_.hidden);
  }
  std::vector<float> projectInputs(const std::vector<float>& bias) const {
    const int64_t n = 4 * dims_.hidden, rows = dims_.seq * dims_.batch;
    std::vector<float> out(static_cast<size_t>(rows * n));
    for (int64_t row = 0; row < rows; ++row) std::copy(bias.begin(), bias.end(), &out[row * n]);
    const float* x = ctx_.input(0).data<float>();
    if (dims_.layout == 0) {
      sgemm(false, true, rows, n, dims_.input, 1.0f, x, dims_.input, w_, dims_.input, 1.0f,
            out.data(), n);
      return out;
    }
    // layout 1: X is [batch, seq, input]; rows come out batch-major and are moved to [seq, batch].
    std::vector<float> byBatch(out.size());
    sgemm(false, true, rows, n, dims_.input, 1.0f, x, dims_.input, w_, dims_.input, 0.0f,
          byBatch.data(), n);
    for (int64_t b = 0; b < dims_.batch; ++b) {
      for (int64_t t = 0; t < dims_.seq; ++t) {
        const float* src = &byBatch[static_cast<size_t>((b * dims_.seq + t) * n)];
        float* dst = &out[static_cast<size_t>((t * dims_.batch + b) * n)];
        for (int64_t j = 0; j < n; ++j) dst[j] += src[j];
      }
    }
    return out;
  }
  void stepBegins(const std::vector<float>& hState, const std::vector<bool>&) {
    const int64_t n = 4 * dims_.hidden;
    if (packedR_.empty()) {  // one row: a matrix-vector product, which reads R as it is
      sgemm(false, true, dims_.batch, n, dims_.hidden, 1.0f, hState.data(), dims_.hidden, r_,
            dims_.hidden, 0.0f, recurrent_.data(), n);
    } else {
      sgemmPacked(false, dims_.batch, 1.0f, hState.data(), dims_.hidden, packedR_, 0.0f,
                  recurrent_.data(), n);
    }
  }
  void addRecurrent(int64_t b, const float*, float* gates) const {
    const int64_t n = 4 * dims_.hidden;
    const float* row = &recurrent_[static_cast<size_t>(b * n)];
    for (int64_t j = 0; j < n; ++j) gates[j] += row[j];
  }

 private:
  KernelContext& ctx_;
  const RecurrentDims& dims_;
  const float* w_ = nullptr;
  const float* r_ = nullptr;
  PackedMatrix packedR_;          // R^T packed, when the batch has more than one entry
  std::vector<float> recurrent_;  // [batch, 4 * hidden]: this step's h x R^T
};

KernelFn makeLstmKernel(const KernelCreateInfo& info) {
  RecurrentAttrs attrs = parseRecurrentAttrs(info.node, {"Sigmoid", "Tanh", "Tanh"});
  bool inputForget = ir::attrInt(info.node, "input_forget", 0) != 0;
  return [attrs, inputForget](KernelContext& ctx) {
    dispatchRecurrent(ctx.input(0).dtype(), "LSTM", [&](auto tag, auto accTag) {
      using T = typename decltype(tag)::type;
      using Acc = typename decltype(accTag)::type;
      const RecurrentDims dims = recurrentDims(ctx, attrs, 4);
      FloatLstmProducts<T, Acc> products(ctx, dims);
      runLstmRecurrence<T, Acc>(ctx, attrs, inputForget, dims, products);
    });
  };
}

KILN_REGISTER_CPU_KERNEL("LSTM", KernelFactory(makeLstmKernel));

}  // namespace
}  // namespace kiln::cpu
