// CPU kernels for MaxUnpool and MaxRoiPool.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/pool_window.h"
#include "ir/ops/pool_geometry.h"

namespace kiln::cpu {
namespace {

// Scatters X into a zero tensor of the unpooled shape at the flat positions in I. With an
// explicit output_shape, that unpooled tensor fills the output's leading corner (ONNX reference).
void maxUnpool(KernelContext& ctx, const BoundPoolAttrs& bound) {
  const Tensor& x = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  if (indices.shape() != x.shape())
    ctx.fail("I must have the shape of X", ErrorCode::kInvalidArgument);
  if (x.rank() < 3) ctx.fail("expects an input of rank >= 3", ErrorCode::kInvalidArgument);
  ir::PoolAttrs attrs = poolAttrsFor(ctx, bound);
  Shape unpooled = {x.dim(0), x.dim(1)};
  for (size_t i = 0; i < attrs.kernel.size(); ++i) {
    unpooled.push_back((x.dim(i + 2) - 1) * attrs.strides[i] + attrs.kernel[i] - attrs.pads[i] -
                       attrs.pads[i + attrs.kernel.size()]);
  }
  Tensor& y = ctx.output(0);
  for (size_t d = 0; d < y.rank(); ++d) {
    if (y.rank() != unpooled.size() || y.dim(d) < unpooled[d]) {
      ctx.fail("output_shape " + shapeToString(y.shape()) + " is smaller than the unpooled shape " +
                   shapeToString(unpooled),
               ErrorCode::kInvalidArgument);
    }
  }
  const int64_t limit = shapeNumel(unpooled);
  const int64_t* idx = indices.data<int64_t>();
  // Position of a flat index of the unpooled tensor within the (possibly larger) output.
  auto outputOffset = [&](int64_t flat) {
    int64_t offset = 0;
    int64_t stride = 1;
    for (size_t d = unpooled.size(); d-- > 0;) {
      offset += (flat % unpooled[d]) * stride;
      flat /= unpooled[d];
      stride *= y.dim(d);
    }
    return offset;
  };
  const bool sameShape = y.shape() == unpooled;
  dispatchFloat(x.dtype(), "MaxUnpool", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (idx[i] < 0 || idx[i] >= limit) {
        ctx.fail(
            "index " + std::to_string(idx[i]) + " is out of range for " + shapeToString(unpooled),
            ErrorCode::kInvalidArgument);
      }
      dst[sameShape ? idx[i] : outputOffset(idx[i])] = src[i];
    }
  });
}

// Caffe-style max pooling over quantized ROI bins (rois: [batch, x1, y1, x2, y2]).
template <typename T>
void maxRoiPool(const KernelContext& ctx, const Tensor& x, const Tensor& rois, Tensor& y,
                int64_t pooledH, int64_t pooledW, double scale) {
  using C = ComputeType<T>;
  const int64_t batch = x.dim(0), channels = x.dim(1), height = x.dim(2), width = x.dim(3);
  for (int64_t r = 0; r < rois.dim(0); ++r) {
    const int64_t b = static_cast<int64_t>(rois.doubleAt(r * 5));
    if (b < 0 || b >= batch)
      ctx.fail("roi batch index " + std::to_string(b) + " is out of range",
               ErrorCode::kInvalidArgument);
    const int64_t startW = std::llround(rois.doubleAt(r * 5 + 1) * scale);
    const int64_t startH = std::llround(rois.doubleAt(r * 5 + 2) * scale);
    const int64_t endW = std::llround(rois.doubleAt(r * 5 + 3) * scale);
    const int64_t endH = std::llround(rois.doubleAt(r * 5 + 4) * scale);
    const double binH =
        static_cast<double>(std::max<int64_t>(endH - startH + 1, 1)) / static_cast<double>(pooledH);
    const double binW =
        static_cast<double>(std::max<int64_t>(endW - startW + 1, 1)) / static_cast<double>(pooledW);
    for (int64_t c = 0; c < channels; ++c) {
      const T* plane = x.data<T>() + (b * channels + c) * height * width;
      T* out = y.data<T>() + (r * channels + c) * pooledH * pooledW;
      for (int64_t ph = 0; ph < pooledH; ++ph) {
        const int64_t h0 =
            std::clamp<int64_t>(static_cast<int64_t>(std::floor(ph * binH)) + startH, 0, height);
        const int64_t h1 = std::clamp<int64_t>(
            static_cast<int64_t>(std::ceil((ph + 1) * binH)) + startH, 0, height);
        for (int64_t pw = 0; pw < pooledW; ++pw) {
          const int64_t w0 =
              std::clamp<int64_t>(static_cast<int64_t>(std::floor(pw * binW)) + startW, 0, width);
          const int64_t w1 = std::clamp<int64_t>(
              static_cast<int64_t>(std::ceil((pw + 1) * binW)) + startW, 0, width);
          C best = h0 < h1 && w0 < w1 ? std::numeric_limits<C>::lowest() : C(0);
          for (int64_t h = h0; h < h1; ++h) {
            for (int64_t w = w0; w < w1; ++w) best = std::max(best, C(plane[h * width + w]));
          }
          out[ph * pooledW + pw] = static_cast<T>(best);
        }
      }
    }
  }
}

KernelFn makeMaxRoiPool(const KernelCreateInfo& info) {
  const std::vector<int64_t> pooled = ir::attrInts(info.node, "pooled_shape");
  const double scale = ir::attrFloat(info.node, "spatial_scale", 1.0f);
  return [pooled, scale](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& rois = ctx.input(1);
    if (rois.rank() != 2 || rois.dim(1) != 5)
      ctx.fail("rois must have shape [num_rois, 5]", ErrorCode::kInvalidArgument);
    Tensor& y = ctx.output(0);
    dispatchFloat(x.dtype(), "MaxRoiPool", [&](auto tag) {
      maxRoiPool<typename decltype(tag)::type>(ctx, x, rois, y, pooled[0], pooled[1], scale);
    });
  };
}

KILN_REGISTER_CPU_KERNEL(
    "MaxUnpool",
    bindKernel([](const ir::Node& node) { return bindPoolAttrs(node, std::nullopt); }, maxUnpool));
KILN_REGISTER_CPU_KERNEL("MaxRoiPool", KernelFactory(makeMaxRoiPool));

}  // namespace
}  // namespace kiln::cpu
