// CPU kernels for Max, Min, Sum and Mean over any number of broadcast inputs.
#include <cmath>
#include <cstring>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"

namespace kiln::cpu {
namespace {

// Folds the inputs pairwise into the output: out = op(in0, in1), then out = op(out, ink).
// The output already has the full broadcast shape, so updating it in place is safe.
template <typename T, typename Op>
void foldInputs(KernelContext& ctx, Tensor& out, Op op) {
  const size_t n = ctx.numInputs();
  if (n == 1) {
    if (out.numel()) std::memcpy(out.raw(), ctx.input(0).raw(), out.byteSize());
    return;
  }
  mapBinary<T, T>(ctx.input(0), ctx.input(1), out, op);
  for (size_t k = 2; k < n; ++k) mapBinary<T, T>(out, ctx.input(k), out, op);
}

// Max and Min propagate NaN like numpy's maximum/minimum.
constexpr auto maxOf = [](auto x, auto y) {
  if constexpr (std::is_floating_point_v<decltype(x)>) {
    if (std::isnan(x)) return x;
  }
  return x > y ? x : y;
};
constexpr auto minOf = [](auto x, auto y) {
  if constexpr (std::is_floating_point_v<decltype(x)>) {
    if (std::isnan(x)) return x;
  }
  return x < y ? x : y;
};
constexpr auto sumOf = [](auto x, auto y) { return wrapAdd(x, y); };

template <typename Op>
KernelFactory variadic(Op op) {
  return bindKernel(opTypeOf, [op](KernelContext& ctx, const std::string& opType) {
    Tensor& out = ctx.output(0);
    dispatchNumeric(out.dtype(), opType.c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      foldInputs<T>(ctx, out, op);
    });
  });
}

KILN_REGISTER_CPU_KERNEL("Max", variadic(maxOf));
KILN_REGISTER_CPU_KERNEL("Min", variadic(minOf));
KILN_REGISTER_CPU_KERNEL("Sum", variadic(sumOf));
KILN_REGISTER_CPU_KERNEL("Mean", KernelFn([](KernelContext& ctx) {
                           Tensor& out = ctx.output(0);
                           dispatchNumeric(out.dtype(), "Mean", [&](auto tag) {
                             using T = typename decltype(tag)::type;
                             foldInputs<T>(ctx, out, sumOf);
                             const auto count = static_cast<ComputeType<T>>(ctx.numInputs());
                             mapUnary<T, T>(out, out, [count](auto v) {
                               return static_cast<decltype(v)>(v / count);
                             });
                           });
                         }));

}  // namespace
}  // namespace kiln::cpu
