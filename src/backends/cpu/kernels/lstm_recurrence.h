// The LSTM recurrence of ONNX LSTM and com.microsoft DynamicQuantizeLSTM: gates i, o, f, c (in
// that order), optional peepholes P ([i, o, f], input 7), clip, input_forget (f = 1 - i), per-batch
// sequence lengths, initial states (inputs 5 and 6) and Y / Y_h / Y_c. The two ops differ only in
// how they multiply by W and R, which `Products` does:
//   setDirection(d)                 loads direction d's weights
//   projectInputs(bias)             X x W^T + bias for every time step, [seq * batch, 4 * hidden],
//                                   valid until the next call
//   stepBegins(hState, active)      called before each step with every batch entry's hidden state
//                                   and which entries the step computes (active[b])
//   addRecurrent(b, h, gates)       gates += h x R^T for batch entry b
// and declares `static constexpr bool kEntriesInParallel`: whether addRecurrent may run for
// several entries of a step at once.
#pragma once
#include "backends/cpu/kernels/rnn_common.h"

namespace kiln::cpu::rnn {

template <typename T, typename Acc, typename Products>
void runLstmRecurrence(KernelContext& ctx, const RecurrentAttrs& attrs, bool inputForget,
                       const RecurrentDims& dims, Products& products) {
  const std::vector<int64_t> lengths = sequenceLengths(ctx, dims);
  const int64_t h = dims.hidden, n = 4 * h;
  T* y = outputSequence<T>(ctx);
  if (ctx.hasInput(7) && ctx.input(7).shape() != Shape{dims.directions, 3 * h}) {
    ctx.fail("P has shape " + shapeToString(ctx.input(7).shape()) + ", expected " +
             shapeToString({dims.directions, 3 * h}));
  }
  // Each entry's own gates and cell activations: a step's entries may run in parallel.
  std::vector<Acc> gatesOfEntries(static_cast<size_t>(dims.batch * n)),
      cellOfEntries(static_cast<size_t>(dims.batch * h));
  // A gate value (an exp or tanh each) costs about two elementwise items (docs/performance.md,
  // "LSTM").
  const int64_t minEntriesPerThread =
      Products::kEntriesInParallel ? std::max<int64_t>(1, kMinElementsPerThread / (2 * n)) : 0;
  for (int64_t d = 0; d < dims.directions; ++d) {
    const bool reverse = attrs.reverse || d == 1;
    const Activation& f = attrs.activations[static_cast<size_t>(d * 3)];
    const Activation& g = attrs.activations[static_cast<size_t>(d * 3 + 1)];
    const Activation& act = attrs.activations[static_cast<size_t>(d * 3 + 2)];
    products.setDirection(d);
    std::vector<Acc> wb, rb;
    directionBiases<Acc, T>(ctx, dims, 4, d, wb, rb);
    std::vector<Acc> bias(static_cast<size_t>(n));
    for (size_t j = 0; j < bias.size(); ++j) bias[j] = wb[j] + rb[j];
    std::vector<Acc> peep(static_cast<size_t>(3 * h), Acc(0));
    if (ctx.hasInput(7)) peep = toVector<Acc>(ctx.input(7).data<T>() + d * 3 * h, 3 * h);
    const Acc *pi = peep.data(), *po = pi + h, *pf = po + h;

    const Acc* xw = products.projectInputs(bias);
    std::vector<Acc> hState = initialState<Acc, T>(ctx, 5, dims, d);
    std::vector<Acc> cState = initialState<Acc, T>(ctx, 6, dims, d);
    auto step = [&](int64_t t, int64_t b) {
      Acc* gates = &gatesOfEntries[static_cast<size_t>(b * n)];
      Acc* cellOut = &cellOfEntries[static_cast<size_t>(b * h)];
      Acc* hb = &hState[static_cast<size_t>(b * h)];
      Acc* cb = &cState[static_cast<size_t>(b * h)];
      const Acc* xwRow = xw + (t * dims.batch + b) * n;
      std::copy(xwRow, xwRow + n, gates);
      products.addRecurrent(b, hb, gates);
      Acc *gi = gates, *go = gi + h, *gf = go + h, *gc = gf + h;
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
      std::copy(cb, cb + h, cellOut);
      activate(act, cellOut, h);
      for (int64_t j = 0; j < h; ++j) hb[j] = go[j] * cellOut[j];
      if (y) {
        T* dst = y + dims.yOffset(t, d, b);
        for (int64_t j = 0; j < h; ++j) dst[j] = static_cast<T>(hb[j]);
      }
    };
    std::vector<bool> active(static_cast<size_t>(dims.batch));
    forEachRecurrentStep(
        dims, lengths, reverse, step,
        [&](int64_t s) {
          for (size_t b = 0; b < active.size(); ++b) active[b] = s < lengths[b];
          products.stepBegins(hState, active);
        },
        minEntriesPerThread);
    writeState<Acc, T>(ctx, 1, dims, d, lengths, hState);
    writeState<Acc, T>(ctx, 2, dims, d, lengths, cState);
  }
}

}  // namespace kiln::cpu::rnn
