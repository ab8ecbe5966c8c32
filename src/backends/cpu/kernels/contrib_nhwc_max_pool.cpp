// CPU kernel of com.microsoft NhwcMaxPool (ir/ops/contrib_nhwc_max_pool.cpp), which
// opt/nhwc_int8_layout.cpp also makes of 8-bit MaxPools between channels-last layers: each output
// pixel's channels are the elementwise maximum of its window's input pixels' channels (a loop the
// compiler vectorizes). A window with no tap inside the input gives 0, as the MaxPool kernel does.
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels/channels_last.h"
#include "backends/cpu/kernels/pool_window.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

// Not aliased, so that the compiler vectorizes it (byte stores may alias anything else).
template <typename T>
void maxInto(T* __restrict dst, const T* __restrict src, int64_t n) {
  for (int64_t c = 0; c < n; ++c) dst[c] = std::max(dst[c], src[c]);
}

template <typename T>
void poolChannelsLast(const PoolWindows& w, const T* x, int64_t batch, int64_t channels, T* y) {
  const int64_t outPlane = w.outPlane(), inPlane = w.inPlane();
  parallelForAtLeast(
      batch * outPlane,
      std::max<int64_t>(1, kMinElementsPerThread / std::max<int64_t>(1, channels)),
      [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t n = p / outPlane, o = p % outPlane;
          const TapRange& r0 = w.taps[0][static_cast<size_t>(o / (w.out[1] * w.out[2]))];
          const TapRange& r1 = w.taps[1][static_cast<size_t>(o / w.out[2] % w.out[1])];
          const TapRange& r2 = w.taps[2][static_cast<size_t>(o % w.out[2])];
          T* dst = y + p * channels;
          bool any = false;
          for (int64_t t0 = r0.first; t0 < r0.last; ++t0) {
            for (int64_t t1 = r1.first; t1 < r1.last; ++t1) {
              for (int64_t t2 = r2.first; t2 < r2.last; ++t2) {
                const int64_t i =
                    ((r0.start + t0 * w.dilation[0]) * w.in[1] + r1.start + t1 * w.dilation[1]) *
                        w.in[2] +
                    r2.start + t2 * w.dilation[2];
                const T* src = x + (n * inPlane + i) * channels;
                if (!any) {
                  std::memcpy(dst, src, static_cast<size_t>(channels) * sizeof(T));
                  any = true;
                  continue;
                }
                maxInto(dst, src, channels);
              }
            }
          }
          if (!any) std::fill(dst, dst + channels, T{0});
        }
      });
}

KernelFn makeNhwcMaxPoolKernel(const KernelCreateInfo& info) {
  const ir::TypeInfo* x = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  if (!x || !x->shape || x->shape->size() < 3)
    ir::failNode(info.node, "x needs a known rank of 3 or more");
  const BoundPoolAttrs bound = bindPoolAttrs(info.node, x->shape->size() - 2);
  return [bound](KernelContext& ctx) {
    const Tensor& in = ctx.input(0);
    const PoolWindows w =
        makePoolWindows(ctx, bound, poolAttrsFor(ctx, bound), channelsFirstShape(in.shape()));
    Tensor& y = ctx.output(0);
    const int64_t channels = in.shape().back();
    if (in.dtype() == DataType::kInt8) {
      poolChannelsLast(w, in.data<int8_t>(), in.dim(0), channels, y.data<int8_t>());
    } else {
      poolChannelsLast(w, in.data<uint8_t>(), in.dim(0), channels, y.data<uint8_t>());
    }
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "NhwcMaxPool",
                                KernelFactory(makeNhwcMaxPoolKernel));

}  // namespace kiln::cpu
