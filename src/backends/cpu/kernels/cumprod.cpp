// CPU kernel of CumProd (opset 26): running products along one axis, optionally exclusive
// and/or reversed, as CumSum does for sums.
#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/reduce_runs.h"
#include "ir/shape_helpers.h"

namespace kiln::cpu {
namespace {

void cumProdKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const ir::Node& node = ctx.node();
  const std::vector<int64_t> axisValue = ctx.input(1).toInt64Vector();
  if (axisValue.size() != 1) ctx.fail("axis must hold one value", ErrorCode::kInvalidArgument);
  const auto axis = static_cast<size_t>(ir::normalizeAxis(node, axisValue[0], static_cast<int64_t>(x.rank())));
  const bool exclusive = ir::attrInt(node, "exclusive", 0) != 0;
  const bool reverse = ir::attrInt(node, "reverse", 0) != 0;
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

KILN_REGISTER_CPU_KERNEL("CumProd", cumProdKernel);

}  // namespace
}  // namespace kiln::cpu
