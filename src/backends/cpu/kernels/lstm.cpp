// CPU kernel for LSTM (the recurrence is lstm_recurrence.h): float W and R, multiplied in Acc.
#include "backends/cpu/kernels/lstm_recurrence.h"

namespace kiln::cpu {
namespace {

using namespace rnn;

// W and R as Acc, transposed once per direction.
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
