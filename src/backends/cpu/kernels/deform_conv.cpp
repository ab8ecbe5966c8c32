// CPU kernel of DeformConv (2-D): a convolution whose every kernel tap reads X at its regular
// position plus a learned (dy, dx) offset, bilinearly interpolated (taps outside X read 0), and
// scaled by an optional mask. Channels share offsets within each of offset_group groups.
#include <cmath>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "ir/shape_helpers.h"

namespace kiln::cpu {
namespace {

/// X[y, x] of one channel plane, bilinearly interpolated; positions outside read 0.
template <typename T>
double bilinearAt(const T* plane, int64_t height, int64_t width, double y, double x) {
  const double fy = std::floor(y), fx = std::floor(x);
  const auto y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx);
  const double ty = y - fy, tx = x - fx;
  double sum = 0;
  for (int dy = 0; dy < 2; ++dy) {
    for (int dx = 0; dx < 2; ++dx) {
      const int64_t yy = y0 + dy, xx = x0 + dx;
      if (yy < 0 || yy >= height || xx < 0 || xx >= width) continue;
      const double w = (dy ? ty : 1 - ty) * (dx ? tx : 1 - tx);
      sum += w * static_cast<double>(static_cast<ComputeType<T>>(plane[yy * width + xx]));
    }
  }
  return sum;
}

struct DeformConvAttrs {
  int64_t group = 1, offsetGroup = 1;
  std::vector<int64_t> strides, dilations, pads;
};

DeformConvAttrs deformConvAttrs(const ir::Node& node) {
  return {ir::attrInt(node, "group", 1), ir::attrInt(node, "offset_group", 1),
          ir::attrInts(node, "strides", {1, 1}), ir::attrInts(node, "dilations", {1, 1}),
          ir::attrInts(node, "pads", {0, 0, 0, 0})};
}

void deformConvKernel(KernelContext& ctx, const DeformConvAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& offset = ctx.input(2);
  const Tensor* bias = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
  const Tensor* mask = ctx.hasInput(4) ? &ctx.input(4) : nullptr;
  if (x.rank() != 4 || w.rank() != 4 || offset.rank() != 4)
    ctx.fail("X, W and offset must be 4-D", ErrorCode::kInvalidArgument);
  const int64_t group = attrs.group, offsetGroup = attrs.offsetGroup;
  const std::vector<int64_t>& strides = attrs.strides;
  const std::vector<int64_t>& dilations = attrs.dilations;
  const std::vector<int64_t>& pads = attrs.pads;
  const int64_t batches = x.dim(0), channels = x.dim(1), height = x.dim(2), width = x.dim(3);
  const int64_t outChannels = w.dim(0), kh = w.dim(2), kw = w.dim(3), taps = kh * kw;
  const int64_t oh = offset.dim(2), ow = offset.dim(3);
  if (group < 1 || offsetGroup < 1 || channels != w.dim(1) * group || outChannels % group != 0 ||
      channels % offsetGroup != 0) {
    ctx.fail("channels of X " + x.describe() + " and W " + w.describe() + " do not match group " +
                 std::to_string(group) + " and offset_group " + std::to_string(offsetGroup),
             ErrorCode::kInvalidArgument);
  }
  if (offset.dim(0) != batches || offset.dim(1) != offsetGroup * 2 * taps) {
    ctx.fail("offset " + offset.describe() + " must be (N, offset_group * 2 * kH * kW, oH, oW)",
             ErrorCode::kInvalidArgument);
  }
  if (mask && (mask->shape() != Shape{batches, offsetGroup * taps, oh, ow})) {
    ctx.fail("mask " + mask->describe() + " must be (N, offset_group * kH * kW, oH, oW)",
             ErrorCode::kInvalidArgument);
  }
  if (bias && bias->numel() != outChannels)
    ctx.fail("B must hold one value per output channel", ErrorCode::kInvalidArgument);
  Tensor& y = ctx.allocateOutput(0, x.dtype(), {batches, outChannels, oh, ow});
  const int64_t inPerGroup = channels / group, outPerGroup = outChannels / group,
                inPerOffsetGroup = channels / offsetGroup;
  dispatchFloat(x.dtype(), "DeformConv", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto value = [](const Tensor& t, int64_t i) {
      return static_cast<double>(static_cast<ComputeType<T>>(t.data<T>()[i]));
    };
    for (int64_t n = 0; n < batches; ++n) {
      for (int64_t m = 0; m < outChannels; ++m) {
        const int64_t g = m / outPerGroup;
        for (int64_t i = 0; i < oh; ++i) {
          for (int64_t j = 0; j < ow; ++j) {
            double sum = bias ? value(*bias, m) : 0.0;
            for (int64_t cg = 0; cg < inPerGroup; ++cg) {
              const int64_t c = g * inPerGroup + cg;
              const int64_t og = c / inPerOffsetGroup;
              const T* plane = x.data<T>() + (n * channels + c) * height * width;
              for (int64_t k = 0; k < taps; ++k) {
                const int64_t offIndex = ((n * offsetGroup + og) * taps + k) * 2;
                const double dy = value(offset, (offIndex * oh + i) * ow + j);
                const double dx = value(offset, ((offIndex + 1) * oh + i) * ow + j);
                const double py =
                    static_cast<double>(i * strides[0] - pads[0] + (k / kw) * dilations[0]) + dy;
                const double px =
                    static_cast<double>(j * strides[1] - pads[1] + (k % kw) * dilations[1]) + dx;
                double v = bilinearAt(plane, height, width, py, px) *
                           value(w, (m * inPerGroup + cg) * taps + k);
                if (mask)
                  v *= value(*mask, (((n * offsetGroup + og) * taps + k) * oh + i) * ow + j);
                sum += v;
              }
            }
            y.data<T>()[((n * outChannels + m) * oh + i) * ow + j] =
                static_cast<T>(static_cast<ComputeType<T>>(sum));
          }
        }
      }
    }
  });
}

KILN_REGISTER_CPU_KERNEL("DeformConv", bindKernel(deformConvAttrs, deformConvKernel));

}  // namespace
}  // namespace kiln::cpu
