// CPU kernel of CenterCropPad: per listed axis, a larger input is cropped to its center (the
// extra odd element is dropped at the end) and a smaller one is centered in zeros.
#include "backends/cpu/kernels/copy_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/run_checks.h"

namespace kiln::cpu {
namespace {

void centerCropPadKernel(KernelContext& ctx, const std::vector<int64_t>& axesAttr) {
  const Tensor& x = ctx.input(0);
  const std::vector<int64_t> target = ctx.input(1).toInt64Vector();
  const auto rank = static_cast<int64_t>(x.rank());
  std::vector<int64_t> axes = axesAttr;
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (target.size() != axes.size()) {
    ctx.fail("shape holds " + std::to_string(target.size()) + " values for " +
                 std::to_string(axes.size()) + " axes",
             ErrorCode::kInvalidArgument);
  }
  Shape outShape = x.shape();
  // Output index o reads input index o + shift (negative shift: padding before the input).
  std::vector<int64_t> shift(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = normalizeAxis(ctx, axes[i], rank);
    if (target[i] < 0) ctx.fail("shape values must not be negative", ErrorCode::kInvalidArgument);
    const int64_t dim = x.dim(static_cast<size_t>(a));
    outShape[a] = target[i];
    shift[a] = dim >= target[i] ? (dim - target[i]) / 2 : -((target[i] - dim) / 2);
  }
  Tensor& y = ctx.allocateOutput(0, x.dtype(), outShape);
  if (y.numel() == 0) return;
  const std::vector<int64_t> inStrides = contiguousStrides(x.shape());
  dispatchStorage(x.dtype(), "CenterCropPad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    T* out = y.data<T>();
    std::fill(out, out + y.numel(), T{});
    std::vector<int64_t> index(static_cast<size_t>(rank), 0);
    for (int64_t o = 0; o < y.numel(); ++o) {
      int64_t src = 0;
      for (int64_t d = 0; d < rank && src >= 0; ++d) {
        const int64_t i = index[d] + shift[d];
        src = (i < 0 || i >= x.dim(static_cast<size_t>(d))) ? -1 : src + i * inStrides[d];
      }
      if (src >= 0) out[o] = in[src];
      for (int64_t d = rank; d-- > 0;) {
        if (++index[d] < outShape[d]) break;
        index[d] = 0;
      }
    }
  });
}

KILN_REGISTER_CPU_KERNEL(
    "CenterCropPad", bindKernel([](const ir::Node& node) { return ir::attrInts(node, "axes", {}); },
                                centerCropPadKernel));

}  // namespace
}  // namespace kiln::cpu
