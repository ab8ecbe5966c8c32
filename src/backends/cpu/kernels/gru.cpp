// CPU kernel for GRU: gates z, r, h (in that order in W, R and B), linear_before_reset,
// clip, per-batch sequence lengths and both layouts.
#include <optional>
#include <type_traits>

#include "backends/cpu/kernels/rnn_common.h"

namespace kiln::cpu {
namespace {

using namespace rnn;

template <typename T, typename Acc>
void runGru(KernelContext& ctx, const RecurrentAttrs& attrs, bool linearBeforeReset) {
  const RecurrentDims dims = recurrentDims(ctx, attrs, 3);
  // float math: the projection's and each step's SGEMM pack into this workspace in turn.
  void* workspace =
      std::is_same_v<Acc, float>
          ? ctx.workspace(recurrentWorkspaceBytes(
                dims, 3 * dims.hidden, (linearBeforeReset ? 3 : 2) * dims.hidden, poolThreads()))
          : nullptr;
  const std::vector<int64_t> lengths = sequenceLengths(ctx, dims);
  const int64_t h = dims.hidden, n = 3 * h;
  T* y = outputSequence<T>(ctx);
  std::vector<Acc> gates(static_cast<size_t>(n)), recurrent(static_cast<size_t>(h)),
      reset(static_cast<size_t>(h));
  for (int64_t d = 0; d < dims.directions; ++d) {
    const bool reverse = attrs.reverse || d == 1;
    const rnn::Activation& f = attrs.activations[static_cast<size_t>(d * 2)];
    const rnn::Activation& g = attrs.activations[static_cast<size_t>(d * 2 + 1)];
    DirectionWeights<Acc> w = directionWeights<Acc, T>(ctx, dims, 3, d);
    // Rb of z and r always joins the input projection; Rb of h only when it is not scaled by r.
    std::vector<Acc> bias(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      bool keepApart = linearBeforeReset && j >= 2 * h;
      bias[static_cast<size_t>(j)] =
          w.wb[static_cast<size_t>(j)] + (keepApart ? Acc(0) : w.rb[static_cast<size_t>(j)]);
    }
    const Acc* rbh = &w.rb[static_cast<size_t>(2 * h)];
    const Acc* rth = w.rt.data() + 2 * h;  // columns of the h gate in R^T ([hidden, 3 * hidden])

    const std::vector<Acc> xw =
        projectInputs<Acc>(ctx.input(0).data<T>(), dims, w.wt, bias, workspace);
    std::vector<Acc> hState = initialState<Acc, T>(ctx, 5, dims, d);
    // float32: each step multiplies the whole batch's hidden state by R^T in one SGEMM (all three
    // gates with linear_before_reset, else z and r), instead of one row at a time.
    const int64_t batchedCols = linearBeforeReset ? n : 2 * h;
    std::optional<BatchRecurrentProduct> batched;
    if constexpr (std::is_same_v<Acc, float>)
      batched.emplace(w.rt.data(), false, n, dims.batch, h, batchedCols);
    auto stepBegins = [&](int64_t) {
      if constexpr (std::is_same_v<Acc, float>) batched->multiply(hState.data(), workspace);
    };
    forEachRecurrentStep(
        dims, lengths, reverse,
        [&](int64_t t, int64_t b) {
          Acc* hb = &hState[static_cast<size_t>(b * h)];
          const Acc* xwRow = &xw[static_cast<size_t>((t * dims.batch + b) * n)];
          std::copy(xwRow, xwRow + n, gates.begin());
          Acc *gz = gates.data(), *gr = gz + h, *gh = gr + h;
          const float* rowProducts = batched ? batched->row(b) : nullptr;
          if (rowProducts) {
            for (int64_t j = 0; j < 2 * h; ++j) gz[j] += rowProducts[j];
          } else {
            addVectorTimesMatrix(hb, h, w.rt.data(), n, 2 * h, gz);  // z and r columns
          }
          clipValues(gz, 2 * h, attrs.clip);
          activate(f, gz, 2 * h);
          if (linearBeforeReset) {
            std::copy(rbh, rbh + h, recurrent.begin());
            if (rowProducts) {
              for (int64_t j = 0; j < h; ++j)
                recurrent[static_cast<size_t>(j)] += rowProducts[2 * h + j];
            } else {
              addVectorTimesMatrix(hb, h, rth, n, h, recurrent.data());
            }
            for (int64_t j = 0; j < h; ++j) gh[j] += gr[j] * recurrent[static_cast<size_t>(j)];
          } else {
            for (int64_t j = 0; j < h; ++j) reset[static_cast<size_t>(j)] = gr[j] * hb[j];
            addVectorTimesMatrix(reset.data(), h, rth, n, h, gh);
          }
          clipValues(gh, h, attrs.clip);
          activate(g, gh, h);
          for (int64_t j = 0; j < h; ++j) hb[j] = (Acc(1) - gz[j]) * gh[j] + gz[j] * hb[j];
          if (y) {
            T* dst = y + dims.yOffset(t, d, b);
            for (int64_t j = 0; j < h; ++j) dst[j] = static_cast<T>(hb[j]);
          }
        },
        stepBegins);
    writeState<Acc, T>(ctx, 1, dims, d, lengths, hState);
  }
}

Kernel makeGruKernel(const KernelCreateInfo& info) {
  RecurrentAttrs attrs = parseRecurrentAttrs(info.node, {"Sigmoid", "Tanh"});
  bool linearBeforeReset = ir::attrInt(info.node, "linear_before_reset", 0) != 0;
  const ir::TypeInfo* x = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  WorkspaceFn workspace =
      recurrentWorkspace(attrs, 3, linearBeforeReset ? 3 : 2, x ? x->dtype : DataType::kUndefined);
  KernelFn run = [attrs, linearBeforeReset](KernelContext& ctx) {
    dispatchRecurrent(ctx.input(0).dtype(), "GRU", [&](auto tag, auto accTag) {
      using T = typename decltype(tag)::type;
      using Acc = typename decltype(accTag)::type;
      runGru<T, Acc>(ctx, attrs, linearBeforeReset);
    });
  };
  return {std::move(run), std::move(workspace), {}};
}

const bool kRegistered = [] {
  KernelRegistry::global().addGenericKernel("", "GRU", makeGruKernel);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
