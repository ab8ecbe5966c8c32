// CPU kernels for Conv and ConvInteger: per image and group, im2col + GEMM (pointwise
// convolutions multiply the input directly; depthwise ones accumulate each tap directly).
#include <algorithm>
#include <memory>

#include "backends/cpu/gemm/float_copy.h"
#include "backends/cpu/gemm/im2col.h"
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/gemm/zero_point.h"
#include "backends/cpu/kernel.h"
#include "ir/ops/conv_geometry.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kColumnBufferBytes = int64_t{4} << 20;  // im2col block size: a few MiB, cache-resident

bool isPointwise(const ir::ConvGeometry& g) {
  for (size_t d = 0; d < g.kernel.size(); ++d) {
    if (g.kernel[d] != 1 || g.strides[d] != 1 || g.padsBegin[d] != 0 || g.padsEnd[d] != 0) return false;
  }
  return true;
}

// One input channel per group (depthwise convolutions): im2col would copy each input value
// kernelSize times to feed a one-row GEMM, so each tap is instead accumulated straight into the output.
template <typename T>
void convolveDepthwise(const ir::ConvGeometry& g, const T* image, const Shape& imageShape, const T* weights, T* out) {
  const int64_t stride = g.strides.back();
  forEachPatchRun(imageShape, g.output, g, [&](int64_t k, int64_t start, int64_t base, int64_t lo, int64_t hi) {
    const T wk = weights[k];
    T* dst = out + start;
    if (stride == 1) {
      const T* src = image + (base + lo);
      for (int64_t o = lo; o < hi; ++o) dst[o] += wk * src[o - lo];
    } else {
      for (int64_t o = lo; o < hi; ++o) dst[o] += wk * image[base + o * stride];
    }
  });
}

template <typename T>
void convolve(const ir::ConvGeometry& g, int64_t group, const Tensor& x, const Tensor& w, const Tensor* bias,
              Tensor& y) {
  const int64_t batch = x.dim(0), channels = x.dim(1), outChannels = w.dim(0);
  const Shape imageShape(x.shape().begin() + 2, x.shape().end());
  const Shape& outShape = g.output;
  const int64_t imageSize = shapeNumel(imageShape), outSize = shapeNumel(outShape);
  const int64_t groupChannels = channels / group, groupOut = outChannels / group;
  const int64_t depth = groupChannels * shapeNumel(g.kernel);
  const bool depthwise = groupChannels == 1;
  const bool pointwise = isPointwise(g);
  // im2col runs over blocks of output rows (first spatial dim) so its buffer stays cache-sized
  // instead of growing with the image; it writes every element, so it is left uninitialized.
  const int64_t rowSize = outSize / std::max<int64_t>(outShape[0], 1);
  const int64_t blockRows = std::clamp<int64_t>(kColumnBufferBytes / std::max<int64_t>(depth * rowSize * sizeof(T), 1), 1,
                                                std::max<int64_t>(outShape[0], 1));
  std::unique_ptr<T[]> col(depthwise || pointwise ? nullptr : new T[static_cast<size_t>(depth * blockRows * rowSize)]);
  ir::ConvGeometry block = g;  // the geometry of one block of rows
  const T* px = x.data<T>();
  const T* pw = w.data<T>();
  const T* pb = bias ? bias->data<T>() : nullptr;
  T* py = y.data<T>();
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t gi = 0; gi < group; ++gi) {
      const T* image = px + (n * channels + gi * groupChannels) * imageSize;
      T* out = py + (n * outChannels + gi * groupOut) * outSize;
      if (pb || depthwise) {  // the products are added to the bias (or zero)
        for (int64_t m = 0; m < groupOut; ++m) {
          std::fill(out + m * outSize, out + (m + 1) * outSize, pb ? pb[gi * groupOut + m] : T(0));
        }
      }
      if (depthwise) {
        for (int64_t m = 0; m < groupOut; ++m) {
          convolveDepthwise(g, image, imageShape, pw + (gi * groupOut + m) * depth, out + m * outSize);
        }
        continue;
      }
      const T* groupWeights = pw + gi * groupOut * depth;
      if (pointwise) {
        gemm<T>(false, false, groupOut, outSize, depth, T(1), groupWeights, depth, image, outSize, pb ? T(1) : T(0), out,
                outSize);
        continue;
      }
      for (int64_t r0 = 0; r0 < outShape[0]; r0 += blockRows) {
        Shape blockShape = outShape;
        blockShape[0] = std::min(blockRows, outShape[0] - r0);
        block.padsBegin[0] = g.padsBegin[0] - r0 * g.strides[0];  // row r0 becomes the block's row 0
        const int64_t columns = blockShape[0] * rowSize;
        im2col(image, groupChannels, imageShape, blockShape, block, col.get());
        gemm<T>(false, false, groupOut, columns, depth, T(1), groupWeights, depth, col.get(), columns,
                pb ? T(1) : T(0), out + r0 * rowSize, outSize);
      }
    }
  }
}

// Checks X and W against group and returns the geometry for their shapes.
ir::ConvGeometry checkedGeometry(const KernelContext& ctx, const Tensor& x, const Tensor& w, int64_t group) {
  if (x.rank() < 3 || w.rank() != x.rank())
    ctx.fail("X and W must have the same rank >= 3", ErrorCode::kInvalidArgument);
  if (group <= 0 || x.dim(1) != w.dim(1) * group || w.dim(0) % group != 0) {
    ctx.fail("channels of X " + x.describe() + " and W " + w.describe() + " do not fit group " + std::to_string(group),
             ErrorCode::kInvalidArgument);
  }
  return ir::convGeometry(ctx.node(), Shape(x.shape().begin() + 2, x.shape().end()),
                          Shape(w.shape().begin() + 2, w.shape().end()));
}

void convKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* bias = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
  const int64_t group = ir::attrInt(ctx.node(), "group", 1);
  const ir::ConvGeometry g = checkedGeometry(ctx, x, w, group);
  if (bias && bias->numel() != w.dim(0))
    ctx.fail("B must have one value per output channel", ErrorCode::kInvalidArgument);
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  runConvolutionInFloat(x, w, bias, y, "Conv", [&](auto tag, const Tensor& fx, const Tensor& fw, const Tensor* fb, Tensor& fy) {
    convolve<typename decltype(tag)::type>(g, group, fx, fw, fb, fy);
  });
}

// int32 convolution of 8-bit X and W after subtracting their zero points (x_zero_point per
// tensor, w_zero_point per tensor or per output channel); padding is thus the zero point.
void convIntegerKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* xZero = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
  const Tensor* wZero = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
  const int64_t group = ir::attrInt(ctx.node(), "group", 1);
  const ir::ConvGeometry g = checkedGeometry(ctx, x, w, group);
  const int64_t outChannels = w.dim(0);
  for (const std::string& problem :
       {checkZeroPoint(xZero, 1, "x_zero_point"), checkZeroPoint(wZero, outChannels, "w_zero_point")}) {
    if (!problem.empty()) ctx.fail(problem, ErrorCode::kInvalidArgument);
  }
  const Tensor wx = widenMinusZeroPoint(x, xZero, 1, 1);
  const Tensor ww = widenMinusZeroPoint(w, wZero, w.numel() / std::max<int64_t>(outChannels, 1), outChannels);
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  convolve<int32_t>(g, group, wx, ww, nullptr, y);
}

}  // namespace

KILN_REGISTER_CPU_KERNEL("Conv", KernelFn(convKernel));
KILN_REGISTER_CPU_KERNEL("ConvInteger", KernelFn(convIntegerKernel));

}  // namespace kiln::cpu
