// CPU kernel for LSTM (the recurrence is lstm_recurrence.h): float W and R, multiplied in Acc;
// float32 through SGEMM.
#include <memory>
#include <optional>

#include "backends/cpu/kernels/lstm_recurrence.h"

namespace kiln::cpu {
namespace {

using namespace rnn;

// W and R as Acc, transposed once per direction: the products for double, one row at a time.
template <typename T, typename Acc>
class FloatLstmProducts {
 public:
  FloatLstmProducts(KernelContext& ctx, const RecurrentDims& dims, const PackedRecurrentWeights&)
      : ctx_(ctx), dims_(dims) {}
  static constexpr bool kEntriesInParallel = true;
  void setDirection(int64_t d) { w_ = directionWeights<Acc, T>(ctx_, dims_, 4, d); }
  const Acc* projectInputs(const std::vector<Acc>& bias) {
    xw_ = rnn::projectInputs<Acc>(ctx_.input(0).data<T>(), dims_, w_.wt, bias, nullptr);
    return xw_.data();
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
  std::vector<Acc> xw_;
};

// float32: SGEMMs on W and R packed when the kernel was made (constant weights) or straight on
// the op's W and R (no transposed copies): the input projection of every step and batch entry
// is one product, and each step multiplies the whole batch's hidden state by R^T at once, so R
// is read once per step, not once per batch entry.
template <>
class FloatLstmProducts<float, float> {
 public:
  FloatLstmProducts(KernelContext& ctx, const RecurrentDims& dims,
                    const PackedRecurrentWeights& packed)
      : ctx_(ctx),
        dims_(dims),
        packed_(packed),
        xw_(static_cast<float*>(ctx.workspace(
            projectionBytes(dims, 4 * dims.hidden) +
            recurrentWorkspaceBytes(dims, 4 * dims.hidden, 4 * dims.hidden, poolThreads())))),
        workspace_(reinterpret_cast<char*>(xw_) + projectionBytes(dims, 4 * dims.hidden)) {}
  static constexpr bool kEntriesInParallel = true;
  void setDirection(int64_t d) {
    d_ = d;
    if (!packed_.empty()) {
      recurrent_.emplace(packed_.r[static_cast<size_t>(d)], dims_.batch);
      return;
    }
    const int64_t n = 4 * dims_.hidden;
    recurrent_.emplace(ctx_.input(2).data<float>() + d * n * dims_.hidden, true, dims_.hidden,
                       dims_.batch, dims_.hidden, n);
  }
  const float* projectInputs(const std::vector<float>& bias) const {
    const float* x = ctx_.input(0).data<float>();
    if (!packed_.empty()) {
      projectInputsSgemm(x, dims_, packed_.w[static_cast<size_t>(d_)], bias, xw_, workspace_);
    } else {
      const float* w = ctx_.input(1).data<float>() + d_ * 4 * dims_.hidden * dims_.input;
      projectInputsSgemm(x, dims_, w, true, dims_.input, bias, xw_, workspace_);
    }
    return xw_;
  }
  void stepBegins(const std::vector<float>& hState, const std::vector<bool>&) {
    recurrent_->multiply(hState.data(), workspace_);
  }
  void addRecurrent(int64_t b, const float*, float* gates) const {
    const float* row = recurrent_->row(b);
    for (int64_t j = 0; j < 4 * dims_.hidden; ++j) gates[j] += row[j];
  }

 private:
  KernelContext& ctx_;
  const RecurrentDims& dims_;
  const PackedRecurrentWeights& packed_;  // empty: W and R are read from the inputs
  float* xw_;        // the input projection's output, at the start of the workspace
  void* workspace_;  // after it: the projection's and then each step's product's packing
  int64_t d_ = 0;
  std::optional<BatchRecurrentProduct> recurrent_;  // this direction's h x R^T
};

Kernel makeLstmKernel(const KernelCreateInfo& info) {
  RecurrentAttrs attrs = parseRecurrentAttrs(info.node, {"Sigmoid", "Tanh", "Tanh"});
  bool inputForget = ir::attrInt(info.node, "input_forget", 0) != 0;
  const ir::TypeInfo* x = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  WorkspaceFn workspace =
      recurrentWorkspace(attrs, 4, 4, x ? x->dtype : DataType::kUndefined, true);
  // Shared by copies of the kernel (packed data is immutable).
  auto packed = std::make_shared<const PackedRecurrentWeights>(packRecurrentWeights(info, 4, 4));
  KernelFn run = [attrs, inputForget, packed](KernelContext& ctx) {
    dispatchRecurrent(ctx.input(0).dtype(), "LSTM", [&](auto tag, auto accTag) {
      using T = typename decltype(tag)::type;
      using Acc = typename decltype(accTag)::type;
      const RecurrentDims dims = recurrentDims(ctx, attrs, 4);
      FloatLstmProducts<T, Acc> products(ctx, dims, *packed);
      runLstmRecurrence<T, Acc>(ctx, attrs, inputForget, dims, products);
    });
  };
  return {std::move(run), std::move(workspace), {}};
}

const bool kRegistered = [] {
  KernelRegistry::global().addGenericKernel("", "LSTM", makeLstmKernel);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
