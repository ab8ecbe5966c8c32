// Conv by im2col + GEMM (pointwise convolutions multiply the input directly; depthwise ones
// accumulate each tap directly): the last float32 candidate of Conv and kiln::FusedConv
// (conv_candidates.cpp lists the specialised ones), the kernel of the other dtypes
// (any_conv_im2col_gemm), and ConvInteger.
#include <algorithm>
#include <memory>
#include <type_traits>

#include "backends/cpu/activation.h"
#include "backends/cpu/gemm/float_copy.h"
#include "backends/cpu/gemm/im2col.h"
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/gemm/zero_point.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/conv_kernel.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/thread_pool.h"
#include "core/aligned_memory.h"
#include "ir/ops/conv_geometry.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kColumnBufferBytes = int64_t{4}
                                       << 20;  // im2col block size: a few MiB, cache-resident

bool isPointwise(const ir::ConvGeometry& g) {
  for (size_t d = 0; d < g.kernel.size(); ++d) {
    if (g.kernel[d] != 1 || g.strides[d] != 1 || g.padsBegin[d] != 0 || g.padsEnd[d] != 0)
      return false;
  }
  return true;
}

// One input channel per group (depthwise convolutions): im2col would copy each input value
// kernelSize times to feed a one-row GEMM, so each tap is instead accumulated straight into the
// output.
template <typename T>
void convolveDepthwise(const ir::ConvGeometry& g, const T* image, const Shape& imageShape,
                       const T* weights, T* out) {
  const int64_t stride = g.strides.back();
  forEachPatchRun(imageShape, g.output, g,
                  [&](int64_t k, int64_t start, int64_t base, int64_t lo, int64_t hi) {
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

// Applies the epilogue to `rows` channel rows of `columns` values starting at out (row stride
// outSize), bias[m] added when addBias; split over the thread pool by channel.
template <typename T>
void finishRows(const ConvEpilogue& e, T* out, const T* residual, const T* bias, int64_t rows,
                int64_t columns, int64_t outSize) {
  if constexpr (std::is_same_v<T, float>) {
    if (!e.active() && !bias) return;
    parallelFor(rows, [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        applyEpilogue(e.act, out + m * outSize, columns, bias ? bias[m] : 0.0f,
                      residual ? residual + m * outSize : nullptr);
      }
    });
  } else {
    for (int64_t m = 0; m < rows && bias; ++m) {
      for (int64_t j = 0; j < columns; ++j) out[m * outSize + j] += bias[m];
    }
  }
}

// C[M x N] (row stride ldc) = W x B then bias, residual and activation while each tile is in
// cache (float, with W's product done by `packed` when its kernel keeps W packed); other types
// multiply, then add the bias.
template <typename T>
void multiplyWeights(const PackedWeightsProduct* packed, const ConvEpilogue& e, int64_t M,
                     int64_t N, int64_t K, const T* w, const T* b, int64_t ldb, const T* bias,
                     const T* residual, T* c, int64_t ldc, void* workspace) {
  if constexpr (std::is_same_v<T, float>) {
    const GemmEpilogue ep{bias, true, e.act, residual, ldc};
    if (packed) {
      packed->multiply(N, b, ldb, c, ldc, ep, workspace);
    } else {
      sgemm(false, false, M, N, K, 1.0f, w, K, b, ldb, 0.0f, c, ldc, workspace, ep);
    }
  } else {
    gemm<T>(false, false, M, N, K, T(1), w, K, b, ldb, T(0), c, ldc, workspace);
    finishRows<T>(e, c, residual, bias, M, N, ldc);
  }
}

// im2col over the thread pool: channels are independent slices of the column buffer.
template <typename T>
void parallelIm2col(const T* image, int64_t channels, int64_t imageSize, const Shape& imageShape,
                    const Shape& blockShape, const ir::ConvGeometry& block, T* col) {
  const int64_t sliceSize = shapeNumel(block.kernel) * shapeNumel(blockShape);
  parallelFor(channels, [&](int64_t c0, int64_t c1) {
    im2col(image + c0 * imageSize, c1 - c0, imageShape, blockShape, block, col + c0 * sliceSize);
  });
}

// Rows of output per im2col block, so that the column buffer stays cache-sized instead of
// growing with the image.
int64_t im2colBlockRows(const ir::ConvGeometry& g, int64_t depth, size_t elementSize) {
  const Shape& outShape = g.output;
  const int64_t outSize = shapeNumel(outShape);
  const int64_t rowSize = outSize / std::max<int64_t>(outShape[0], 1);
  return std::clamp<int64_t>(
      kColumnBufferBytes /
          std::max<int64_t>(depth * rowSize * static_cast<int64_t>(elementSize), 1),
      1, std::max<int64_t>(outShape[0], 1));
}

// The scratch of one convolution: its im2col column buffer (none for pointwise and depthwise
// convolutions), and the shape of the largest weight product (M x N by K; none for depthwise).
struct ConvScratch {
  uint64_t columnBytes = 0;
  int64_t M = 0, N = 0, K = 0;
};

ConvScratch convScratchOf(const ir::ConvGeometry& g, int64_t channels, int64_t outChannels,
                          int64_t group, size_t elementSize) {
  ConvScratch s;
  const int64_t groupChannels = channels / group;
  if (groupChannels == 1 || g.output.empty()) return s;
  s.M = outChannels / group;
  s.K = groupChannels * shapeNumel(g.kernel);
  const int64_t outSize = shapeNumel(g.output);
  if (isPointwise(g)) {
    s.N = outSize;
    return s;
  }
  const int64_t rowSize = outSize / std::max<int64_t>(g.output[0], 1);
  s.N = im2colBlockRows(g, s.K, elementSize) * rowSize;
  s.columnBytes = static_cast<uint64_t>(s.K * s.N) * elementSize;
  return s;
}

// Scratch bytes of that convolution: the column buffer, then the GEMM's packing (by `product`
// when it is given and the convolution ungrouped, else by sgemm when the math is float).
uint64_t convScratchBytes(const ConvScratch& s, int64_t group, bool floatMath,
                          const PackedWeightsProduct* product, int threads) {
  uint64_t gemm = 0;
  if (product && group == 1) {
    gemm = product->workspaceBytes(s.N, threads);
  } else if (floatMath) {
    gemm = sgemmWorkspaceBytes(s.M, s.N, s.K, threads);
  }
  return cacheLineBytes(s.columnBytes) + gemm;
}

template <typename T>
void convolve(KernelContext& ctx, const ir::ConvGeometry& g, int64_t group, const Tensor& x,
              const Tensor& w, const Tensor* bias, Tensor& y, const ConvEpilogue& epilogue = {},
              const PackedWeightsProduct* packedW = nullptr) {
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
  // im2col runs over blocks of output rows (first spatial dim), in the workspace; it writes
  // every element, so the workspace needs no initialization. The GEMM packs after it.
  const int64_t rowSize = outSize / std::max<int64_t>(outShape[0], 1);
  const int64_t blockRows = im2colBlockRows(g, depth, sizeof(T));
  const ConvScratch scratch = convScratchOf(g, channels, outChannels, group, sizeof(T));
  auto* ws = static_cast<uint8_t*>(ctx.workspace(
      convScratchBytes(scratch, group, std::is_same_v<T, float>, packedW, poolThreads())));
  T* col = scratch.columnBytes ? reinterpret_cast<T*>(ws) : nullptr;
  void* gemmWs = ws ? ws + cacheLineBytes(scratch.columnBytes) : nullptr;
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
          convolveDepthwise(g, image, imageShape, pw + (gi * groupOut + m) * depth,
                            out + m * outSize);
        }
        finishRows<T>(epilogue, out, residual, groupBias, groupOut, outSize, outSize);
        continue;
      }
      const T* groupWeights = pw + gi * groupOut * depth;
      const PackedWeightsProduct* packed = group == 1 ? packedW : nullptr;
      if (pointwise) {
        multiplyWeights<T>(packed, epilogue, groupOut, outSize, depth, groupWeights, image, outSize,
                           groupBias, residual, out, outSize, gemmWs);
        continue;
      }
      for (int64_t r0 = 0; r0 < outShape[0]; r0 += blockRows) {
        Shape blockShape = outShape;
        blockShape[0] = std::min(blockRows, outShape[0] - r0);
        block.padsBegin[0] =
            g.padsBegin[0] - r0 * g.strides[0];  // row r0 becomes the block's row 0
        const int64_t columns = blockShape[0] * rowSize;
        parallelIm2col(image, groupChannels, imageSize, imageShape, blockShape, block, col);
        multiplyWeights<T>(packed, epilogue, groupOut, columns, depth, groupWeights, col, columns,
                           groupBias, residual ? residual + r0 * rowSize : nullptr,
                           out + r0 * rowSize, outSize, gemmWs);
      }
    }
  }
}

// Checks X and W against group and returns the geometry for their shapes: the one computed at
// build time when their spatial sizes are the static ones.
ir::ConvGeometry checkedGeometry(const KernelContext& ctx, const ConvAttrs& a, const Tensor& x,
                                 const Tensor& w) {
  if (x.rank() < 3 || w.rank() != x.rank())
    ctx.fail("X and W must have the same rank >= 3", ErrorCode::kInvalidArgument);
  if (a.group <= 0 || x.dim(1) != w.dim(1) * a.group || w.dim(0) % a.group != 0) {
    ctx.fail("channels of X " + x.describe() + " and W " + w.describe() + " do not fit group " +
                 std::to_string(a.group),
             ErrorCode::kInvalidArgument);
  }
  const Shape xs(x.shape().begin() + 2, x.shape().end()),
      ws(w.shape().begin() + 2, w.shape().end());
  if (a.geometry && xs == *a.xSpatial && ws == *a.wSpatial) return *a.geometry;
  return ir::convGeometry(a.node, xs, ws);
}

Shape spatialOf(const Shape& s) { return s.size() > 2 ? Shape(s.begin() + 2, s.end()) : Shape{}; }

void convKernel(KernelContext& ctx, const ConvAttrs& a) {
  ConvCall call;
  if (!startConvCall(ctx, a, call)) return;
  runConvolutionInFloat(
      *call.x, *call.w, call.bias, *call.y, "Conv",
      [&](auto tag, const Tensor& fx, const Tensor& fw, const Tensor* fb, Tensor& fy) {
        convolve<typename decltype(tag)::type>(ctx, call.g, a.group, fx, fw, fb, fy);
      });
}

}  // namespace

ConvAttrs convAttrs(const KernelCreateInfo& info, bool fused) {
  ConvAttrs a;
  a.node =
      nodeLabelWithAttrs(info.node, {"kernel_shape", "strides", "dilations", "pads", "auto_pad"});
  a.group = ir::attrInt(info.node, "group", 1);
  a.fused = fused;
  if (fused) a.act = fusedActivationOf(info.node);
  const ir::TypeInfo* x = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  const ir::TypeInfo* w = info.inputTypes.size() > 1 ? info.inputTypes[1] : nullptr;
  // Only the spatial sizes enter the geometry: a dynamic batch keeps it static.
  auto spatial = [](const ir::TypeInfo* t) -> std::optional<Shape> {
    if (!t || !t->shape || t->shape->size() < 3) return std::nullopt;
    Shape s;
    for (size_t d = 2; d < t->shape->size(); ++d) {
      if (!(*t->shape)[d].isKnown()) return std::nullopt;
      s.push_back((*t->shape)[d].value);
    }
    return s;
  };
  a.xSpatial = spatial(x);
  a.wSpatial = spatial(w);
  if (a.xSpatial && a.wSpatial && a.xSpatial->size() == a.wSpatial->size()) {
    a.geometry = ir::convGeometry(info.node, *a.xSpatial, *a.wSpatial);
  } else {
    a.xSpatial.reset();
    a.wSpatial.reset();
  }
  return a;
}

bool startConvCall(KernelContext& ctx, const ConvAttrs& a, ConvCall& call) {
  call.x = &ctx.input(0);
  call.w = &ctx.input(1);
  call.bias = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
  call.residual = a.fused && ctx.hasInput(3) ? &ctx.input(3) : nullptr;
  const Tensor& x = *call.x;
  const Tensor& w = *call.w;
  if (a.fused && (x.dtype() != DataType::kFloat32 || w.dtype() != DataType::kFloat32 ||
                  (call.bias && call.bias->dtype() != DataType::kFloat32))) {
    ctx.fail("FusedConv supports float32 only, got X " + x.describe(), ErrorCode::kUnsupportedNode);
  }
  call.g = checkedGeometry(ctx, a, x, w);
  if (call.bias && call.bias->numel() != w.dim(0))
    ctx.fail("B must have one value per output channel", ErrorCode::kInvalidArgument);
  call.y = &ctx.output(0);
  const Tensor* z = call.residual;
  if (z && (z->dtype() != DataType::kFloat32 || z->shape() != call.y->shape())) {
    ctx.fail("residual Z " + z->describe() + " must be float32 shaped like the output " +
                 call.y->describe(),
             ErrorCode::kInvalidArgument);
  }
  return call.y->numel() != 0;
}

std::optional<ir::ConvGeometry> convGeometryFor(const ConvAttrs& a, const Shape* x,
                                                const Shape* w) {
  if (!x || !w || x->size() < 3 || w->size() != x->size() || a.group <= 0) return std::nullopt;
  const Shape xs = spatialOf(*x), ws = spatialOf(*w);
  ir::ConvGeometry g = a.geometry && xs == *a.xSpatial && ws == *a.wSpatial
                           ? *a.geometry
                           : ir::convGeometry(a.node, xs, ws);
  for (int64_t d : g.output)
    if (d <= 0) return std::nullopt;
  return g;
}

uint64_t convWorkspaceBytes(const ConvAttrs& a, const Shape* x, const Shape* w, size_t elementSize,
                            int threads, const PackedWeightsProduct* product) {
  const std::optional<ir::ConvGeometry> g = convGeometryFor(a, x, w);
  if (!g) return 0;
  const ConvScratch s = convScratchOf(*g, (*x)[1], (*w)[0], a.group, elementSize);
  return convScratchBytes(s, a.group, elementSize == sizeof(float), product, threads);
}

PackedWeightsProduct sgemmWeightsProduct(const PackedMatrix& packed) {
  return {[packed](int64_t N, const float* b, int64_t ldb, float* c, int64_t ldc,
                   const GemmEpilogue& ep, void* workspace) {
            sgemmPacked(packed, N, 1.0f, false, b, ldb, 0.0f, c, ldc, workspace, ep);
          },
          [packed](int64_t N, int threads) { return sgemmWorkspaceBytes(packed, N, threads); }};
}

void convolveIm2colFloat(KernelContext& ctx, const ConvAttrs& a, const ConvCall& call,
                         const PackedWeightsProduct* product) {
  convolve<float>(ctx, call.g, a.group, *call.x, *call.w, call.bias, *call.y,
                  ConvEpilogue{a.act, call.residual}, product);
}

namespace {

// int32 convolution of 8-bit X and W after subtracting their zero points (x_zero_point per
// tensor, w_zero_point per tensor or per output channel); padding is thus the zero point.
void convIntegerKernel(KernelContext& ctx, const ConvAttrs& a) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* xZero = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
  const Tensor* wZero = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
  const ir::ConvGeometry g = checkedGeometry(ctx, a, x, w);
  const int64_t outChannels = w.dim(0);
  for (const std::string& problem : {checkZeroPoint(xZero, 1, "x_zero_point"),
                                     checkZeroPoint(wZero, outChannels, "w_zero_point")}) {
    if (!problem.empty()) ctx.fail(problem, ErrorCode::kInvalidArgument);
  }
  const Tensor wx = widenMinusZeroPoint(x, xZero, 1, 1);
  const Tensor ww =
      widenMinusZeroPoint(w, wZero, w.numel() / std::max<int64_t>(outChannels, 1), outChannels);
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  convolve<int32_t>(ctx, g, a.group, wx, ww, nullptr, y);
}

// Conv of the dtypes without candidates of their own (float64, float16, bfloat16; float32 has
// its list in conv_candidates.cpp, whose last candidate takes every float32 node).
const bool kRegistered = [] {
  KernelCandidate c;
  c.id = "any_conv_im2col_gemm";
  c.create = [](const KernelCreateInfo& info) {
    ConvAttrs a = convAttrs(info, false);
    // float64 computes in double, the 16-bit floats in float copies.
    const bool wide = !info.inputTypes.empty() && info.inputTypes[0] &&
                      info.inputTypes[0]->dtype == DataType::kFloat64;
    const size_t elementSize = wide ? sizeof(double) : sizeof(float);
    Kernel k;
    k.workspace = [a, elementSize](const std::vector<const Shape*>& in, int threads) {
      return convWorkspaceBytes(a, in.empty() ? nullptr : in[0], in.size() > 1 ? in[1] : nullptr,
                                elementSize, threads);
    };
    k.run = [a = std::move(a)](KernelContext& ctx) { convKernel(ctx, a); };
    return k;
  };
  KernelRegistry::global().addCandidate("", "Conv", DataType::kUndefined, std::move(c));
  return true;
}();

}  // namespace

KILN_REGISTER_CPU_KERNEL("ConvInteger", KernelFactory([](const KernelCreateInfo& info) -> KernelFn {
                           return [a = convAttrs(info, false)](KernelContext& ctx) {
                             convIntegerKernel(ctx, a);
                           };
                         }));

}  // namespace kiln::cpu
