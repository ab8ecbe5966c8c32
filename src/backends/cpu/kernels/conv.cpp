// CPU kernels for Conv, ConvInteger and kiln's FusedConv (Conv + bias + residual + activation):
// per image and group, im2col + GEMM (pointwise convolutions multiply the input directly;
// depthwise ones accumulate each tap directly, with a specialised kernel for 2-D K x K shapes, and
// so do 2-D ones with few output channels, in conv_few_outputs.h).
#include <algorithm>
#include <memory>
#include <type_traits>

#include "backends/cpu/gemm/float_copy.h"
#include "backends/cpu/gemm/im2col.h"
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/gemm/zero_point.h"
#include "backends/cpu/activation.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/conv_depthwise.h"
#include "backends/cpu/kernels/conv_few_outputs.h"
#include "backends/cpu/kernels/conv_winograd.h"
#include "backends/cpu/thread_pool.h"
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

// What follows the convolution: y = act(conv + bias + residual), residual shaped like y. Only
// float convolutions carry an activation or residual (FusedConv is made for float32 graphs).
struct ConvEpilogue {
  Activation act;
  const Tensor* residual = nullptr;
  bool active() const { return act.kind != ActivationKind::kNone || residual; }
};

// Weights transformed once when the kernel is made (constant float32 W of an ungrouped node):
// W packed as the GEMM's left operand, Winograd filters for 3x3 kernels and W reordered for the
// direct few-output kernel when it has few output channels; empty otherwise.
struct PreparedWeights {
  PackedMatrix packed;
  std::shared_ptr<const WinogradWeights> winograd;
  std::shared_ptr<const FewOutputWeights> fewOutputs;
};

// Once W is packed, the kernel reads only W's shape (unless a convolution with one input channel
// per group takes the depthwise path, which reads W itself), so the engine may free the original.
PreparedWeights prepareWeights(const KernelCreateInfo& info) {
  PreparedWeights p;
  const Tensor* w = info.constants.size() > 1 ? info.constants[1] : nullptr;
  if (!w || w->dtype() != DataType::kFloat32 || w->rank() < 3 || ir::attrInt(info.node, "group", 1) != 1) return p;
  const int64_t outChannels = w->dim(0), depth = w->numel() / std::max<int64_t>(outChannels, 1);
  p.packed = packA(false, outChannels, depth, w->data<float>(), depth);
  if (w->rank() == 4 && w->dim(2) == 3 && w->dim(3) == 3 && outChannels >= 256 && w->dim(1) >= 256) {
    p.winograd = std::make_shared<const WinogradWeights>(packWinogradFilters(w->data<float>(), outChannels, w->dim(1)));
  }
  if (w->rank() == 4 && fewOutputWeightsUseful(1, outChannels, 2, w->dim(2), w->dim(3))) {
    p.fewOutputs = std::make_shared<const FewOutputWeights>(
        packFewOutputWeights(w->data<float>(), outChannels, w->dim(1), w->dim(2), w->dim(3)));
  }
  if (w->dim(1) > 1) info.keepsOwnCopyOf(1);
  return p;
}

// Applies the epilogue to `rows` channel rows of `columns` values starting at out (row stride
// outSize), bias[m] added when addBias; split over the thread pool by channel.
template <typename T>
void finishRows(const ConvEpilogue& e, T* out, const T* residual, const T* bias, int64_t rows, int64_t columns,
                int64_t outSize) {
  if constexpr (std::is_same_v<T, float>) {
    if (!e.active() && !bias) return;
    parallelFor(rows, [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        applyEpilogue(e.act, out + m * outSize, columns, bias ? bias[m] : 0.0f, residual ? residual + m * outSize : nullptr);
      }
    });
  } else {
    for (int64_t m = 0; m < rows && bias; ++m) {
      for (int64_t j = 0; j < columns; ++j) out[m * outSize + j] += bias[m];
    }
  }
}

// C[M x N] (row stride ldc) = W x B then bias, residual and activation while each tile is in
// cache (float, with W pre-packed when it is constant); other types multiply, then add the bias.
template <typename T>
void multiplyWeights(const PreparedWeights& prepared, const ConvEpilogue& e, int64_t M, int64_t N, int64_t K, const T* w,
                     const T* b, int64_t ldb, const T* bias, const T* residual, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    const GemmEpilogue ep{bias, true, e.act, residual, ldc};
    if (!prepared.packed.empty() && prepared.packed.rows() == M && prepared.packed.cols() == K) {
      sgemmPacked(prepared.packed, N, 1.0f, false, b, ldb, 0.0f, c, ldc, ep);
    } else {
      sgemm(false, false, M, N, K, 1.0f, w, K, b, ldb, 0.0f, c, ldc, ep);
    }
  } else {
    gemm<T>(false, false, M, N, K, T(1), w, K, b, ldb, T(0), c, ldc);
    finishRows<T>(e, c, residual, bias, M, N, ldc);
  }
}

// im2col over the thread pool: channels are independent slices of the column buffer.
template <typename T>
void parallelIm2col(const T* image, int64_t channels, int64_t imageSize, const Shape& imageShape, const Shape& blockShape,
                    const ir::ConvGeometry& block, T* col) {
  const int64_t sliceSize = shapeNumel(block.kernel) * shapeNumel(blockShape);
  parallelFor(channels, [&](int64_t c0, int64_t c1) {
    im2col(image + c0 * imageSize, c1 - c0, imageShape, blockShape, block, col + c0 * sliceSize);
  });
}

template <typename T>
void convolve(const ir::ConvGeometry& g, int64_t group, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
              const ConvEpilogue& epilogue = {}, const PreparedWeights& prepared = {}) {
  const int64_t batch = x.dim(0), channels = x.dim(1), outChannels = w.dim(0);
  const Shape imageShape(x.shape().begin() + 2, x.shape().end());
  const Shape& outShape = g.output;
  const int64_t imageSize = shapeNumel(imageShape), outSize = shapeNumel(outShape);
  const int64_t groupChannels = channels / group, groupOut = outChannels / group;
  const int64_t depth = groupChannels * shapeNumel(g.kernel);
  const bool depthwise = groupChannels == 1;
  const bool pointwise = isPointwise(g);
  const T* px = x.data<T>();
  const T* pw = w.data<T>();
  const T* pb = bias ? bias->data<T>() : nullptr;
  const T* pr = epilogue.residual ? epilogue.residual->data<T>() : nullptr;
  T* py = y.data<T>();
  if constexpr (std::is_same_v<T, float>) {
    if (depthwise && groupOut == 1 && depthwiseConv2dSupported(g)) {
      depthwiseConv2d(g, batch, channels, imageShape[0], imageShape[1], px, pw, pb, pr, epilogue.act, py);
      return;
    }
    // As for Winograd below: with W packed, only the prepared copy may be read.
    if (fewOutputConvPreferred(g, group, channels, outChannels) && (prepared.fewOutputs || prepared.packed.empty())) {
      FewOutputWeights computed;
      const FewOutputWeights* filters = prepared.fewOutputs.get();
      if (!filters) {
        computed = packFewOutputWeights(pw, outChannels, channels, g.kernel[0], g.kernel[1]);
        filters = &computed;
      }
      fewOutputConv2d(g, batch, imageShape[0], imageShape[1], px, *filters, pb, pr, epilogue.act, py);
      return;
    }
    // With W packed when the kernel was made, Winograd runs only if its filters were made too:
    // the original W may have been freed (see prepareWeights).
    if (winogradSupported(g, group, channels, outChannels) && (prepared.winograd || prepared.packed.empty())) {
      WinogradWeights computed;
      const WinogradWeights* filters = prepared.winograd.get();
      if (!filters) {
        computed = packWinogradFilters(pw, outChannels, channels);
        filters = &computed;
      }
      winogradConv2d(g, batch, channels, imageShape[0], imageShape[1], outChannels, px, *filters, py,
                     WinogradEpilogue{pb, pr, epilogue.act});
      return;
    }
  }
  // im2col runs over blocks of output rows (first spatial dim) so its buffer stays cache-sized
  // instead of growing with the image; it writes every element, so it is left uninitialized.
  const int64_t rowSize = outSize / std::max<int64_t>(outShape[0], 1);
  const int64_t blockRows = std::clamp<int64_t>(kColumnBufferBytes / std::max<int64_t>(depth * rowSize * sizeof(T), 1), 1,
                                                std::max<int64_t>(outShape[0], 1));
  std::unique_ptr<T[]> col(depthwise || pointwise ? nullptr : new T[static_cast<size_t>(depth * blockRows * rowSize)]);
  ir::ConvGeometry block = g;  // the geometry of one block of rows
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t gi = 0; gi < group; ++gi) {
      const T* image = px + (n * channels + gi * groupChannels) * imageSize;
      const int64_t outOffset = (n * outChannels + gi * groupOut) * outSize;
      T* out = py + outOffset;
      const T* residual = pr ? pr + outOffset : nullptr;
      const T* groupBias = pb ? pb + gi * groupOut : nullptr;
      if (depthwise) {  // the taps are accumulated onto zero, then bias and epilogue follow
        std::fill(out, out + groupOut * outSize, T(0));
        for (int64_t m = 0; m < groupOut; ++m) {
          convolveDepthwise(g, image, imageShape, pw + (gi * groupOut + m) * depth, out + m * outSize);
        }
        finishRows<T>(epilogue, out, residual, groupBias, groupOut, outSize, outSize);
        continue;
      }
      const T* groupWeights = pw + gi * groupOut * depth;
      const PreparedWeights& packed = group == 1 ? prepared : PreparedWeights{};
      if (pointwise) {
        multiplyWeights<T>(packed, epilogue, groupOut, outSize, depth, groupWeights, image, outSize, groupBias, residual, out,
                           outSize);
        continue;
      }
      for (int64_t r0 = 0; r0 < outShape[0]; r0 += blockRows) {
        Shape blockShape = outShape;
        blockShape[0] = std::min(blockRows, outShape[0] - r0);
        block.padsBegin[0] = g.padsBegin[0] - r0 * g.strides[0];  // row r0 becomes the block's row 0
        const int64_t columns = blockShape[0] * rowSize;
        parallelIm2col(image, groupChannels, imageSize, imageShape, blockShape, block, col.get());
        multiplyWeights<T>(packed, epilogue, groupOut, columns, depth, groupWeights, col.get(), columns, groupBias,
                           residual ? residual + r0 * rowSize : nullptr, out + r0 * rowSize, outSize);
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

void convKernel(KernelContext& ctx, const PreparedWeights& prepared) {
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
    convolve<typename decltype(tag)::type>(g, group, fx, fw, fb, fy, {}, prepared);
  });
}

// kiln::FusedConv: Conv's inputs X, W, B plus an optional residual Z shaped like the output;
// Y = activation(Conv(X, W, B) + Z).
KernelFn makeFusedConvKernel(const KernelCreateInfo& info) {
  const Activation act = fusedActivationOf(info.node);
  const PreparedWeights prepared = prepareWeights(info);
  return [act, prepared](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* bias = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
    const Tensor* residual = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
    if (x.dtype() != DataType::kFloat32 || w.dtype() != DataType::kFloat32 || (bias && bias->dtype() != DataType::kFloat32)) {
      ctx.fail("FusedConv supports float32 only, got X " + x.describe(), ErrorCode::kUnsupportedNode);
    }
    const int64_t group = ir::attrInt(ctx.node(), "group", 1);
    const ir::ConvGeometry g = checkedGeometry(ctx, x, w, group);
    if (bias && bias->numel() != w.dim(0))
      ctx.fail("B must have one value per output channel", ErrorCode::kInvalidArgument);
    Tensor& y = ctx.output(0);
    if (residual && (residual->dtype() != DataType::kFloat32 || residual->shape() != y.shape())) {
      ctx.fail("residual Z " + residual->describe() + " must be float32 shaped like the output " + y.describe(),
               ErrorCode::kInvalidArgument);
    }
    if (y.numel() == 0) return;
    convolve<float>(g, group, x, w, bias, y, ConvEpilogue{act, residual}, prepared);
  };
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

KILN_REGISTER_CPU_KERNEL("Conv", KernelFactory([](const KernelCreateInfo& info) -> KernelFn {
  const PreparedWeights prepared = prepareWeights(info);
  return [prepared](KernelContext& ctx) { convKernel(ctx, prepared); };
}));
KILN_REGISTER_CPU_KERNEL("ConvInteger", KernelFn(convIntegerKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("kiln", "FusedConv", KernelFactory(makeFusedConvKernel));

}  // namespace kiln::cpu
