// CPU kernel for ConvTranspose: per image and group, GEMM with the transposed weight into columns,
// then col2im scatters the columns onto the output (pointwise cases write the output directly).
#include <memory>

#include "backends/cpu/gemm/float_copy.h"
#include "backends/cpu/gemm/im2col.h"
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/kernels/node_label.h"
#include "ir/ops/conv_geometry.h"

namespace kiln::cpu {
namespace {

bool writesOutputDirectly(const ir::ConvGeometry& g, const Shape& imageShape) {
  for (size_t d = 0; d < g.kernel.size(); ++d) {
    if (g.kernel[d] != 1 || g.strides[d] != 1 || g.padsBegin[d] != 0 ||
        g.output[d] != imageShape[d])
      return false;
  }
  return true;
}

template <typename T>
void convolveTransposed(const ir::ConvGeometry& g, int64_t group, const Tensor& x, const Tensor& w,
                        const Tensor* bias, Tensor& y) {
  const int64_t batch = x.dim(0), channels = x.dim(1);
  const int64_t groupChannels = channels / group, groupOut = w.dim(1),
                outChannels = groupOut * group;
  const Shape imageShape(x.shape().begin() + 2, x.shape().end());
  const Shape& outShape = g.output;
  const int64_t imageSize = shapeNumel(imageShape), outSize = shapeNumel(outShape);
  const int64_t rows = groupOut * shapeNumel(g.kernel);  // one column row per (output channel, tap)
  const bool direct = writesOutputDirectly(g, imageShape);
  // Every element is written by the GEMM before it is read, so the buffer is left uninitialized.
  std::unique_ptr<T[]> col(direct ? nullptr : new T[static_cast<size_t>(rows * imageSize)]);
  const T* px = x.data<T>();
  const T* pw = w.data<T>();
  const T* pb = bias ? bias->data<T>() : nullptr;
  T* py = y.data<T>();
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t gi = 0; gi < group; ++gi) {
      const T* image = px + (n * channels + gi * groupChannels) * imageSize;
      const T* weights = pw + gi * groupChannels * rows;  // [groupChannels, rows]
      T* out = py + (n * outChannels + gi * groupOut) * outSize;
      for (int64_t m = 0; m < groupOut; ++m) {
        std::fill(out + m * outSize, out + (m + 1) * outSize, pb ? pb[gi * groupOut + m] : T(0));
      }
      if (direct) {
        gemm<T>(true, false, rows, imageSize, groupChannels, T(1), weights, rows, image, imageSize,
                T(1), out, outSize);
      } else {
        gemm<T>(true, false, rows, imageSize, groupChannels, T(1), weights, rows, image, imageSize,
                T(0), col.get(), imageSize);
        col2imAdd(col.get(), groupOut, outShape, imageShape, g, out);
      }
    }
  }
}

struct ConvTransposeAttrs {
  ir::Node
      geometry;  // label with the attributes ir::convTransposeGeometry reads at each run's sizes
  int64_t group = 1;
};

ConvTransposeAttrs convTransposeAttrs(const ir::Node& node) {
  return {nodeLabelWithAttrs(node, {"kernel_shape", "strides", "dilations", "pads", "auto_pad",
                                    "output_padding", "output_shape"}),
          ir::attrInt(node, "group", 1)};
}

void convTransposeKernel(KernelContext& ctx, const ConvTransposeAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* bias = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
  const int64_t group = attrs.group;
  if (x.rank() < 3 || w.rank() != x.rank())
    ctx.fail("X and W must have the same rank >= 3", ErrorCode::kInvalidArgument);
  if (group <= 0 || x.dim(1) != w.dim(0) || x.dim(1) % group != 0) {
    ctx.fail("channels of X " + x.describe() + " and W " + w.describe() + " do not fit group " +
                 std::to_string(group),
             ErrorCode::kInvalidArgument);
  }
  if (bias && bias->numel() != w.dim(1) * group) {
    ctx.fail("B must have one value per output channel", ErrorCode::kInvalidArgument);
  }
  const ir::ConvGeometry g =
      ir::convTransposeGeometry(attrs.geometry, Shape(x.shape().begin() + 2, x.shape().end()),
                                Shape(w.shape().begin() + 2, w.shape().end()));
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  runConvolutionInFloat(
      x, w, bias, y, "ConvTranspose",
      [&](auto tag, const Tensor& fx, const Tensor& fw, const Tensor* fb, Tensor& fy) {
        convolveTransposed<typename decltype(tag)::type>(g, group, fx, fw, fb, fy);
      });
}

}  // namespace

KILN_REGISTER_CPU_KERNEL("ConvTranspose", bindKernel(convTransposeAttrs, convTransposeKernel));

}  // namespace kiln::cpu
