// CPU kernel for the simple RNN: H = f(X * W^T + H * R^T + Wb + Rb), with clip, per-batch
// sequence lengths and both layouts.
#include "backends/cpu/kernels/rnn_common.h"

namespace kiln::cpu {
namespace {

using namespace rnn;

template <typename T, typename Acc>
void runRnn(KernelContext& ctx, const RecurrentAttrs& attrs) {
  const RecurrentDims dims = recurrentDims(ctx, attrs, 1);
  void* workspace =
      std::is_same_v<Acc, float>
          ? ctx.workspace(recurrentWorkspaceBytes(dims, dims.hidden, 0, poolThreads()))
          : nullptr;  // the input projection's SGEMM
  const std::vector<int64_t> lengths = sequenceLengths(ctx, dims);
  const int64_t h = dims.hidden;
  T* y = outputSequence<T>(ctx);
  std::vector<Acc> next(static_cast<size_t>(h));
  for (int64_t d = 0; d < dims.directions; ++d) {
    const bool reverse = attrs.reverse || d == 1;
    const rnn::Activation& f = attrs.activations[static_cast<size_t>(d)];
    DirectionWeights<Acc> w = directionWeights<Acc, T>(ctx, dims, 1, d);
    std::vector<Acc> bias(static_cast<size_t>(h));
    for (size_t j = 0; j < bias.size(); ++j) bias[j] = w.wb[j] + w.rb[j];

    const std::vector<Acc> xw =
        projectInputs<Acc>(ctx.input(0).data<T>(), dims, w.wt, bias, workspace);
    std::vector<Acc> hState = initialState<Acc, T>(ctx, 5, dims, d);
    forEachRecurrentStep(dims, lengths, reverse, [&](int64_t t, int64_t b) {
      Acc* hb = &hState[static_cast<size_t>(b * h)];
      const Acc* xwRow = &xw[static_cast<size_t>((t * dims.batch + b) * h)];
      std::copy(xwRow, xwRow + h, next.begin());
      addVectorTimesMatrix(hb, h, w.rt.data(), h, h, next.data());
      clipValues(next.data(), h, attrs.clip);
      activate(f, next.data(), h);
      std::copy(next.begin(), next.end(), hb);
      if (y) {
        T* dst = y + dims.yOffset(t, d, b);
        for (int64_t j = 0; j < h; ++j) dst[j] = static_cast<T>(hb[j]);
      }
    });
    writeState<Acc, T>(ctx, 1, dims, d, lengths, hState);
  }
}

Kernel makeRnnKernel(const KernelCreateInfo& info) {
  RecurrentAttrs attrs = parseRecurrentAttrs(info.node, {"Tanh"});
  const ir::TypeInfo* x = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  WorkspaceFn workspace = recurrentWorkspace(attrs, 1, 0, x ? x->dtype : DataType::kUndefined);
  KernelFn run = [attrs](KernelContext& ctx) {
    dispatchRecurrent(ctx.input(0).dtype(), "RNN", [&](auto tag, auto accTag) {
      using T = typename decltype(tag)::type;
      using Acc = typename decltype(accTag)::type;
      runRnn<T, Acc>(ctx, attrs);
    });
  };
  return {std::move(run), std::move(workspace), {}};
}

const bool kRegistered = [] {
  KernelRegistry::global().addGenericKernel("", "RNN", makeRnnKernel);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
