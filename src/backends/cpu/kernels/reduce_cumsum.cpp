// CPU kernel of CumSum: running sums along one axis, optionally exclusive and/or reversed.
#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/reduce_runs.h"
#include "backends/cpu/kernels/run_checks.h"

namespace kiln::cpu {
namespace {

void cumSumKernel(KernelContext& ctx, const CumulativeAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const std::vector<int64_t> axisValue = ctx.input(1).toInt64Vector();
  if (axisValue.size() != 1) ctx.fail("axis must hold one value");
  const auto axis =
      static_cast<size_t>(normalizeAxis(ctx, axisValue[0], static_cast<int64_t>(x.rank())));
  const bool exclusive = attrs.exclusive, reverse = attrs.reverse;
  const AxisBlocks b = x.rank() == 0 ? AxisBlocks{} : axisBlocks(x.shape(), axis);
  Tensor& y = ctx.output(0);
  dispatchNumeric(x.dtype(), "CumSum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    // One running sum per inner position, so the loop over inner vectorizes.
    std::vector<C> sum(static_cast<size_t>(b.inner));
    for (int64_t o = 0; o < b.outer; ++o) {
      std::fill(sum.begin(), sum.end(), C(0));
      for (int64_t step = 0; step < b.extent; ++step) {
        const int64_t r = reverse ? b.extent - 1 - step : step;
        const int64_t base = (o * b.extent + r) * b.inner;
        const T* in = px + base;
        T* out = py + base;
        for (int64_t i = 0; i < b.inner; ++i) {
          const C before = sum[i];
          sum[i] = before + C(in[i]);
          out[i] = static_cast<T>(exclusive ? before : sum[i]);
        }
      }
    }
  });
}

KILN_REGISTER_CPU_KERNEL("CumSum", bindKernel(cumulativeAttrs, cumSumKernel));

}  // namespace
}  // namespace kiln::cpu
