// CPU kernel of Swish (opset 24): y = x * sigmoid(alpha * x).
#include <cmath>

#include "backends/cpu/activation_row.h"
#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"

namespace kiln::cpu {
namespace {

void swishKernel(KernelContext& ctx, double alpha) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  if (x.dtype() == DataType::kFloat32 &&
      alpha == 1.0) {  // SiLU: the vectorised fused-activation code
    applyActivationInParallel(Activation{ActivationKind::kSiLU}, x.data<float>(), y.data<float>(),
                              x.numel());
    return;
  }
  dispatchFloat(x.dtype(), "Swish", [&](auto tag) {
    using T = typename decltype(tag)::type;
    mapUnary<T, T>(x, y, [alpha](auto v) {
      using C = decltype(v);
      return static_cast<C>(v / (C(1) + std::exp(static_cast<C>(-alpha) * v)));
    });
  });
}

KILN_REGISTER_CPU_KERNEL("Swish",
                         bindKernel(
                             [](const ir::Node& node) {
                               return static_cast<double>(ir::attrFloat(node, "alpha", 1.0f));
                             },
                             swishKernel));

}  // namespace
}  // namespace kiln::cpu
