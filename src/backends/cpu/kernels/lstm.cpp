// CPU kernel for LSTM: gates i, o, f, c (in that order in W, R and B), optional peepholes P
// ([i, o, f]), clip, input_forget (f = 1 - i), per-batch sequence lengths and both layouts.
#include "backends/cpu/kernels/rnn_common.h"

namespace kiln::cpu {
namespace {

using namespace rnn;

template <typename T, typename Acc>
void runLstm(KernelContext& ctx, const RecurrentAttrs& attrs, bool inputForget) {
  const RecurrentDims dims = recurrentDims(ctx, attrs, 4);
  const std::vector<int64_t> lengths = sequenceLengths(ctx, dims);
  const int64_t h = dims.hidden, n = 4 * h;
  T* y = outputSequence<T>(ctx);
  if (ctx.hasInput(7) && ctx.input(7).shape() != Shape{dims.directions, 3 * h}) {
    ctx.fail("P has shape " + shapeToString(ctx.input(7).shape()) + ", expected " + shapeToString({dims.directions, 3 * h}));
  }
  std::vector<Acc> gates(static_cast<size_t>(n)), cellOut(static_cast<size_t>(h));
  for (int64_t d = 0; d < dims.directions; ++d) {
    const bool reverse = attrs.reverse || d == 1;
    const Activation& f = attrs.activations[static_cast<size_t>(d * 3)];
    const Activation& g = attrs.activations[static_cast<size_t>(d * 3 + 1)];
    const Activation& act = attrs.activations[static_cast<size_t>(d * 3 + 2)];
    DirectionWeights<Acc> w = directionWeights<Acc, T>(ctx, dims, 4, d);
    std::vector<Acc> bias(static_cast<size_t>(n));
    for (size_t j = 0; j < bias.size(); ++j) bias[j] = w.wb[j] + w.rb[j];
    std::vector<Acc> peep(static_cast<size_t>(3 * h), Acc(0));
    if (ctx.hasInput(7)) peep = toVector<Acc>(ctx.input(7).data<T>() + d * 3 * h, 3 * h);
    const Acc *pi = peep.data(), *po = pi + h, *pf = po + h;

    const std::vector<Acc> xw = projectInputs<Acc>(ctx.input(0).data<T>(), dims, w.wt, bias);
    std::vector<Acc> hState = initialState<Acc, T>(ctx, 5, dims, d);
    std::vector<Acc> cState = initialState<Acc, T>(ctx, 6, dims, d);
    forEachRecurrentStep(dims, lengths, reverse, [&](int64_t t, int64_t b) {
      Acc* hb = &hState[static_cast<size_t>(b * h)];
      Acc* cb = &cState[static_cast<size_t>(b * h)];
      const Acc* xwRow = &xw[static_cast<size_t>((t * dims.batch + b) * n)];
      std::copy(xwRow, xwRow + n, gates.begin());
      addVectorTimesMatrix(hb, h, w.rt.data(), n, n, gates.data());
      Acc *gi = gates.data(), *go = gi + h, *gf = go + h, *gc = gf + h;
      for (int64_t j = 0; j < h; ++j) {
        gi[j] += pi[j] * cb[j];
        gf[j] += pf[j] * cb[j];
      }
      clipValues(gi, h, attrs.clip);
      activate(f, gi, h);
      if (inputForget) {
        for (int64_t j = 0; j < h; ++j) gf[j] = Acc(1) - gi[j];
      } else {
        clipValues(gf, h, attrs.clip);
        activate(f, gf, h);
      }
      clipValues(gc, h, attrs.clip);
      activate(g, gc, h);
      for (int64_t j = 0; j < h; ++j) {
        cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
        go[j] += po[j] * cb[j];
      }
      clipValues(go, h, attrs.clip);
      activate(f, go, h);
      std::copy(cb, cb + h, cellOut.begin());
      activate(act, cellOut.data(), h);
      for (int64_t j = 0; j < h; ++j) hb[j] = go[j] * cellOut[static_cast<size_t>(j)];
      if (y) {
        T* dst = y + dims.yOffset(t, d, b);
        for (int64_t j = 0; j < h; ++j) dst[j] = static_cast<T>(hb[j]);
      }
    });
    writeState<Acc, T>(ctx, 1, dims, d, lengths, hState);
    writeState<Acc, T>(ctx, 2, dims, d, lengths, cState);
  }
}

KernelFn makeLstmKernel(const KernelCreateInfo& info) {
  RecurrentAttrs attrs = parseRecurrentAttrs(info.node, {"Sigmoid", "Tanh", "Tanh"});
  bool inputForget = ir::attrInt(info.node, "input_forget", 0) != 0;
  return [attrs, inputForget](KernelContext& ctx) {
    dispatchRecurrent(ctx.input(0).dtype(), "LSTM", [&](auto tag, auto accTag) {
      using T = typename decltype(tag)::type;
      using Acc = typename decltype(accTag)::type;
      runLstm<T, Acc>(ctx, attrs, inputForget);
    });
  };
}

KILN_REGISTER_CPU_KERNEL("LSTM", KernelFactory(makeLstmKernel));

}  // namespace
}  // namespace kiln::cpu
