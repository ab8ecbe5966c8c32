// The direct depthwise candidate of QLinearConv and ConvInteger (one input channel per group):
// each input channel is converted once to floats x - x_zp, and each output channel accumulates
// (w - w_zp) * (x - x_zp) tap by tap into a plane of float sums, vectorized over the positions of
// an output row (plain loops the compiler widens to FMA; 2-D convolutions walk rows directly,
// others through forEachPatchRun), then finishes the plane with the GEMM's epilogue. Padding taps
// are skipped: they would add (x_zp - x_zp) * w = 0.
//
// Float sums are exact here: every term is an integer of magnitude <= 255 * 255 and there are at
// most kMaxDepthwiseTaps of them, so every partial sum is an integer below 2^24, which float32
// represents exactly (and FMA rounds nothing). Larger kernels take the GEMM candidates.
#include <algorithm>

#include "backends/cpu/gemm/im2col.h"
#include "backends/cpu/kernels/qconv_common.h"
#include "backends/cpu/kernels/qgemm_op_support.h"
#include "backends/cpu/qgemm/qgemm_epilogue.h"

namespace kiln::cpu {
namespace {

struct QConvDepthwise {
  QConv c;
  std::vector<int16_t> w;  // outChannels x kernelSize, as W stores them
};

uint64_t planeBytes(int64_t n) { return alignTo64(static_cast<uint64_t>(n) * 4); }

// Per thread: the channel as floats, its float sums and their int32 copy; then the per-channel
// parameters.
uint64_t threadBytes(int64_t imageSize, int64_t outSize) {
  return planeBytes(imageSize) + 2 * planeBytes(outSize);
}
uint64_t workspaceBytes(const QConvDepthwise& k, int64_t imageSize, int64_t outSize, int threads) {
  return static_cast<uint64_t>(std::max(threads, 1)) * threadBytes(imageSize, outSize) +
         qconvParamBytes(k.c);
}

template <typename T>
void toShiftedFloats(const T* image, int64_t n, int32_t xZero, float* plane) {
  for (int64_t i = 0; i < n; ++i)
    plane[i] = static_cast<float>(static_cast<int32_t>(image[i]) - xZero);
}

// The 2-D case with plain loops: for each output row, each tap inside the image adds its
// contiguous (stride 1) or strided run of one input row.
void accumulate2d(const QConvCall& call, const float* plane, const float* w, float* acc) {
  const ir::ConvGeometry& g = call.g;
  const int64_t ih = call.imageShape[0], iw = call.imageShape[1], oh = g.output[0],
                ow = g.output[1];
  const int64_t kh = g.kernel[0], kw = g.kernel[1], sh = g.strides[0], sw = g.strides[1];
  std::fill(acc, acc + oh * ow, 0.0f);
  for (int64_t oy = 0; oy < oh; ++oy) {
    float* dst = acc + oy * ow;
    for (int64_t ky = 0; ky < kh; ++ky) {
      const int64_t iy = oy * sh - g.padsBegin[0] + ky * g.dilations[0];
      if (iy < 0 || iy >= ih) continue;
      const float* row = plane + iy * iw;
      for (int64_t kx = 0; kx < kw; ++kx) {
        // Output columns ox with 0 <= ox * sw + shift < iw.
        const int64_t shift = kx * g.dilations[1] - g.padsBegin[1];
        const int64_t lo = std::min(ow, shift >= 0 ? 0 : (-shift + sw - 1) / sw);
        const int64_t hi =
            std::clamp<int64_t>(iw - 1 - shift < 0 ? 0 : (iw - 1 - shift) / sw + 1, lo, ow);
        const float wk = w[ky * kw + kx];
        const float* src = row + shift;
        if (sw == 1) {
          for (int64_t ox = lo; ox < hi; ++ox) dst[ox] += wk * src[ox];
        } else {
          for (int64_t ox = lo; ox < hi; ++ox) dst[ox] += wk * src[ox * sw];
        }
      }
    }
  }
}

void accumulateNd(const QConvCall& call, const float* plane, const float* w, float* acc) {
  const ir::ConvGeometry& g = call.g;
  const int64_t stride = g.strides.back();
  std::fill(acc, acc + call.outSize, 0.0f);
  forEachPatchRun(call.imageShape, g.output, g,
                  [&](int64_t k, int64_t start, int64_t base, int64_t lo, int64_t hi) {
                    float* dst = acc + start;
                    for (int64_t o = lo; o < hi; ++o) dst[o] += w[k] * plane[base + o * stride];
                  });
}

void runQConvDepthwise(const QConvDepthwise& k, KernelContext& ctx) {
  const QConv& c = k.c;
  const int threads = poolThreads();
  const Shape& xs = ctx.input(static_cast<size_t>(c.s.a)).shape();
  const int64_t outSize = shapeNumel(qconvGeometry(&ctx, c, xs).output);
  const int64_t imageSize = shapeNumel(Shape(xs.begin() + 2, xs.end()));
  uint8_t* ws =
      static_cast<uint8_t*>(ctx.workspace(workspaceBytes(k, imageSize, outSize, threads)));
  QConvCall call;
  if (!startQConvCall(ctx, c, 0,
                      ws + static_cast<uint64_t>(threads) * threadBytes(imageSize, outSize), call))
    return;
  const int64_t rows = call.batch * c.outChannels;
  const int64_t channels = c.attrs.group;  // one input channel per group
  auto channelRows = [&](int64_t part, int64_t r0, int64_t r1) {
    uint8_t* mine = ws + static_cast<uint64_t>(part) * threadBytes(imageSize, outSize);
    float* plane = reinterpret_cast<float*>(mine);
    float* sums = reinterpret_cast<float*>(mine + planeBytes(imageSize));
    int32_t* acc = reinterpret_cast<int32_t*>(mine + planeBytes(imageSize) + planeBytes(outSize));
    float w[kMaxDepthwiseTaps];
    int64_t planeOf = -1;  // the input channel in `plane`
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / c.outChannels, m = r % c.outChannels;
      const int64_t input = n * channels + m / c.groupOut;
      if (input != planeOf) {
        if (c.xSigned) {
          toShiftedFloats(static_cast<const int8_t*>(call.x->raw()) + input * imageSize, imageSize,
                          call.xZero, plane);
        } else {
          toShiftedFloats(static_cast<const uint8_t*>(call.x->raw()) + input * imageSize, imageSize,
                          call.xZero, plane);
        }
        planeOf = input;
      }
      const int32_t wZero = call.wZero[call.wZeroCount > 1 ? m : 0];
      for (int64_t t = 0; t < c.kernelSize; ++t)
        w[t] = static_cast<float>(k.w[static_cast<size_t>(m * c.kernelSize + t)] - wZero);
      if (call.imageShape.size() == 2) {
        accumulate2d(call, plane, w, sums);
      } else {
        accumulateNd(call, plane, w, sums);
      }
      for (int64_t i = 0; i < outSize; ++i)
        acc[i] = static_cast<int32_t>(sums[i]);  // exact integers
      QTileTerms terms;
      terms.rowAdd = call.bias ? call.bias + m : nullptr;
      void* y = static_cast<uint8_t*>(call.y->raw()) +
                r * outSize * static_cast<int64_t>(call.outElement);
      finishQTile(acc, outSize, 1, outSize, terms, call.out, true, m, y, outSize);
    }
  };
  forEachThreadPart(rows, threads, channelRows);
}

}  // namespace

Kernel makeQConvDepthwise(const KernelCreateInfo& info, const QProductSignature& s) {
  auto k = std::make_shared<QConvDepthwise>();
  k->c = qconvOf(info, s);
  k->w = depthwiseWeights(info, s);
  Kernel kernel;
  kernel.run = [k](KernelContext& ctx) { runQConvDepthwise(*k, ctx); };
  kernel.workspace = [k](const std::vector<const Shape*>& shapes, int threads) -> uint64_t {
    const Shape* x = qconvInputShape(k->c, shapes);
    if (!x) return 0;
    return workspaceBytes(*k, shapeNumel(Shape(x->begin() + 2, x->end())),
                          shapeNumel(qconvGeometry(nullptr, k->c, *x).output), threads);
  };
  return kernel;
}

}  // namespace kiln::cpu
