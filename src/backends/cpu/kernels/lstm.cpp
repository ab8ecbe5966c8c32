// CPU kernel for LSTM (the recurrence is lstm_recurrence.h): float W and R, multiplied in Acc;
// float32 through SGEMM.
#include <optional>

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
    return rnn::projectInputs<Acc>(ctx_.input(0).data<T>(), dims_, w_.wt, bias, nullptr);
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

// float32: SGEMMs straight on the op's W and R (no transposed copies): the input projection of
// every step and batch entry is one product, and each step multiplies the whole batch's hidden
// state by R^T at once, so R is read once per step, not once per batch entry.
template <>
class FloatLstmProducts<float, float> {
 public:
  FloatLstmProducts(KernelContext& ctx, const RecurrentDims& dims)
      : ctx_(ctx),
        dims_(dims),
        workspace_(ctx.workspace(
            recurrentWorkspaceBytes(dims, 4 * dims.hidden, 4 * dims.hidden, poolThreads()))) {}
  void setDirection(int64_t d) {
    const int64_t n = 4 * dims_.hidden;
    w_ = ctx_.input(1).data<float>() + d * n * dims_.input;
    recurrent_.emplace(ctx_.input(2).data<float>() + d * n * dims_.hidden, true, dims_.hidden,
                       dims_.batch, dims_.hidden, n);
  }
  std::vector<float> projectInputs(const std::vector<float>& bias) const {
    return projectInputsSgemm(ctx_.input(0).data<float>(), dims_, w_, true, dims_.input, bias,
                              workspace_);
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
  void* workspace_;  // the projection's and then each step's product's packing
  const float* w_ = nullptr;
  std::optional<BatchRecurrentProduct> recurrent_;  // this direction's h x R^T
};

Kernel makeLstmKernel(const KernelCreateInfo& info) {
  RecurrentAttrs attrs = parseRecurrentAttrs(info.node, {"Sigmoid", "Tanh", "Tanh"});
  bool inputForget = ir::attrInt(info.node, "input_forget", 0) != 0;
  const ir::TypeInfo* x = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  WorkspaceFn workspace = recurrentWorkspace(attrs, 4, 4, x ? x->dtype : DataType::kUndefined);
  KernelFn run = [attrs, inputForget](KernelContext& ctx) {
    dispatchRecurrent(ctx.input(0).dtype(), "LSTM", [&](auto tag, auto accTag) {
      using T = typename decltype(tag)::type;
      using Acc = typename decltype(accTag)::type;
      const RecurrentDims dims = recurrentDims(ctx, attrs, 4);
      FloatLstmProducts<T, Acc> products(ctx, dims);
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
