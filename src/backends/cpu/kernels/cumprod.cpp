// CPU kernel of CumProd (opset 26): running products along one axis, optionally exclusive
// and/or reversed, as CumSum does for sums.
#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/reduce_runs.h"
#include "backends/cpu/kernels/run_checks.h"

namespace kiln::cpu {
namespace {

void cumProdKernel(KernelContext& ctx, const CumulativeAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const std::vector<int64_t> axisValue = ctx.input(1).toInt64Vector();
  if (axisValue.size() != 1) ctx.fail("axis must hold one value", ErrorCode::kInvalidArgument);
  const auto axis =
      static_cast<size_t>(normalizeAxis(ctx, axisValue[0], static_cast<int64_t>(x.rank())));
  const bool exclusive = attrs.exclusive, reverse = attrs.reverse;
  const AxisBlocks b = x.rank() == 0 ? AxisBlocks{} : axisBlocks(x.shape(), axis);
  Tensor& y = ctx.output(0);
  dispatchNumeric(x.dtype(), "CumProd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    std::vector<C> product(static_cast<size_t>(b.inner));
    for (int64_t o = 0; o < b.outer; ++o) {
      std::fill(product.begin(), product.end(), C(1));
      for (int64_t step = 0; step < b.extent; ++step) {
        const int64_t r = reverse ? b.extent - 1 - step : step;
        const int64_t base = (o * b.extent + r) * b.inner;
        for (int64_t i = 0; i < b.inner; ++i) {
          const C before = product[i];
          product[i] = wrapMul(before, static_cast<C>(px[base + i]));
          py[base + i] = static_cast<T>(exclusive ? before : product[i]);
        }
      }
    }
  });
}

KILN_REGISTER_CPU_KERNEL("CumProd", bindKernel(cumulativeAttrs, cumProdKernel));

}  // namespace
}  // namespace kiln::cpu
