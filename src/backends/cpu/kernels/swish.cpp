// CPU kernel of Swish (opset 24): y = x * sigmoid(alpha * x).
#include <cmath>

#include "backends/cpu/kernels/elementwise_util.h"

namespace kiln::cpu {
namespace {

void swishKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double alpha = ir::attrFloat(ctx.node(), "alpha", 1.0f);
  Tensor& y = ctx.output(0);
  dispatchFloat(x.dtype(), "Swish", [&](auto tag) {
    using T = typename decltype(tag)::type;
    mapUnary<T, T>(x, y, [alpha](auto v) {
      using C = decltype(v);
      return static_cast<C>(v / (C(1) + std::exp(static_cast<C>(-alpha) * v)));
    });
  });
}

KILN_REGISTER_CPU_KERNEL("Swish", swishKernel);

}  // namespace
}  // namespace kiln::cpu
