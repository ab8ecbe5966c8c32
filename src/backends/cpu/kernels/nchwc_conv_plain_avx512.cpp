// NchwcConv of a plain NCHW X [N, Ci, H, W] (the first convolution of a CNN: an RGB image) on
// AVX-512, reading X where it lies: no padded copy. The work goes by output row (all output rows
// of all images, cut into equal contiguous ranges, one per thread). Within a row, every pixel
// has the same input rows, so the kernel rows that fall in the vertical padding are skipped for
// the whole row; the row's pixels are then
//   interior: all kernel columns inside X. They go in chunks of P pixels: for each tap and input
//             channel, the P input values lie strideW floats apart in X's plane, so they are
//             broadcast through one pointer with constant offsets, each into M FMAs against the
//             M weight vectors of a packed group (M * P accumulators in registers, as in
//             nchwc_conv_avx512.cpp).
//   border:   a few pixels at each end of the row (the horizontal padding), one at a time over
//             the kernel columns inside X (RGB: with one set of accumulators per channel).
// Strides wider than 2 run every pixel one at a time (rare: no benchmark model has one).
// The sums start from bias + residual (Y may share Z's storage: each chunk reads its Z before
// it stores its Y); Relu and Clip are applied in registers before the one store, any other
// activation over each output row once all its channel blocks are stored (still in L1).
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/activation_simd.h"
#include "backends/cpu/kernels/nchwc_conv.h"
#include "backends/cpu/kernels/nchwc_conv_avx512.h"
#include "backends/cpu/kernels/nchwc_conv_plain.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu::detail {
namespace {

// The part of the kernel a chunk of pixels reads: rows [ky0, ky1) and columns [kx0, kx1).
struct TapRange {
  int64_t ky0 = 0, ky1 = 0, kx0 = 0, kx1 = 0;
};

// The kernel positions k in [0, kernel) whose input coordinate origin + k * dilation lies in [0,
// size).
inline void insideRange(int64_t origin, int64_t kernel, int64_t dilation, int64_t size, int64_t& k0,
                        int64_t& k1) {
  k0 = origin >= 0 ? 0 : (-origin + dilation - 1) / dilation;
  k1 = origin < size ? std::min(kernel, (size - 1 - origin) / dilation + 1) : 0;
  k1 = std::max(k1, k0);
}

// Where one chunk reads and writes.
struct ChunkPlace {
  const float* x;  // the image's X
  int64_t iy,
      ix;  // input row and column of pixel 0 at kernel position (0, 0) (may be in the padding)
  const float* w;  // the packed weights of the group [ky][kx][ci][M][16]
  int64_t b0;      // the group's first output block
  int64_t out;     // float offset in Y (and Z) of pixel 0 in block b0
};

// acc[m][p] += w[m] * xp[p * S] for the M weight vectors at wp.
template <int M, int P, int S>
inline void multiplyTap(__m512 (&acc)[M][P], const float* xp, const float* wp) {
  __m512 wv[M];
#pragma GCC unroll 4
  for (int m = 0; m < M; ++m) wv[m] = _mm512_loadu_ps(wp + m * kBlock);
#pragma GCC unroll 16
  for (int p = 0; p < P; ++p) {
    const __m512 v = _mm512_set1_ps(xp[p * S]);
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m) acc[m][p] = _mm512_fmadd_ps(wv[m], v, acc[m][p]);
  }
}

// M output blocks x P pixels S input columns apart: Y = clamp(bias + Z + sum over the taps of t
// and the input channels of w * x). C is the number of input channels when known at compile
// time (RGB: the channel loop is unrolled), 0 otherwise.
template <int M, int P, int S, int C>
inline void convolveChunk(const NchwcConvArgs& a, const RegisterEpilogue& epi, const ChunkPlace& c,
                          const TapRange& t) {
  const NchwcConvShape& s = *a.shape;
  const int64_t outBlockFloats = s.outHeight * s.outWidth * kBlock;
  __m512 acc[M][P];
  startFromBias<M, P>(acc, a.bias, a.residual ? a.residual + c.out : nullptr, outBlockFloats, c.b0,
                      s.outChannels);
  const int64_t ci = C > 0 ? C : s.inChannels, inPlane = s.height * s.width;
  const int64_t tapFloats = ci * M * kBlock;  // one tap's weights, all input channels
  for (int64_t ky = t.ky0; ky < t.ky1; ++ky) {
    const float* xRow = c.x + (c.iy + ky * s.dilationH) * s.width + c.ix;
    const float* wRow = c.w + ky * s.kernelW * tapFloats;
    for (int64_t kx = t.kx0; kx < t.kx1; ++kx) {
      const float* xp = xRow + kx * s.dilationW;
      const float* wp = wRow + kx * tapFloats;
      if constexpr (C > 0) {
#pragma GCC unroll 4
        for (int ch = 0; ch < C; ++ch)
          multiplyTap<M, P, S>(acc, xp + ch * inPlane, wp + ch * M * kBlock);
      } else {
        for (int64_t ch = 0; ch < ci; ++ch)
          multiplyTap<M, P, S>(acc, xp + ch * inPlane, wp + ch * M * kBlock);
      }
    }
  }
  storeTile<M, P>(epi, acc, a.y + c.out, outBlockFloats);
}

// One border pixel (P = 1) of an RGB image: its M accumulators alone would be M chains of
// dependent FMAs, one tap every 4 cycles (the FMA latency), which made the 3 border pixels of a
// ResNet-50 row cost a fifth of the row. Each input channel gets its own M accumulators (3 * M
// chains), summed before the store.
template <int M>
inline void convolveBorderPixelRgb(const NchwcConvArgs& a, const RegisterEpilogue& epi,
                                   const ChunkPlace& c, const TapRange& t) {
  constexpr int C = 3;
  const NchwcConvShape& s = *a.shape;
  const int64_t outBlockFloats = s.outHeight * s.outWidth * kBlock;
  __m512 acc[C][M][1];
  startFromBias<M, 1>(acc[0], a.bias, a.residual ? a.residual + c.out : nullptr, outBlockFloats,
                      c.b0, s.outChannels);
#pragma GCC unroll 4
  for (int m = 0; m < M; ++m) acc[1][m][0] = acc[2][m][0] = _mm512_setzero_ps();
  const int64_t inPlane = s.height * s.width, tapFloats = C * M * kBlock;
  for (int64_t ky = t.ky0; ky < t.ky1; ++ky) {
    const float* xRow = c.x + (c.iy + ky * s.dilationH) * s.width + c.ix;
    const float* wRow = c.w + ky * s.kernelW * tapFloats;
    for (int64_t kx = t.kx0; kx < t.kx1; ++kx) {
      const float* xp = xRow + kx * s.dilationW;
      const float* wp = wRow + kx * tapFloats;
#pragma GCC unroll 4
      for (int ch = 0; ch < C; ++ch)
        multiplyTap<M, 1, 1>(acc[ch], xp + ch * inPlane, wp + ch * M * kBlock);
    }
  }
#pragma GCC unroll 4
  for (int m = 0; m < M; ++m) {
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[0][m][0], acc[1][m][0]), acc[2][m][0]);
    _mm512_storeu_ps(a.y + c.out + m * outBlockFloats, epi.clamp ? epi.clamped(sum) : sum);
  }
}

// convolveChunk<M, n, stride> for the run-time n <= P and stride 1 or 2.
template <int M, int P>
void convolveChunkOfSize(const NchwcConvArgs& a, const RegisterEpilogue& epi, const ChunkPlace& c,
                         const TapRange& t, int64_t n) {
  if constexpr (P > 1) {
    if (n < P) return convolveChunkOfSize<M, P - 1>(a, epi, c, t, n);
  }
  const bool rgb = a.shape->inChannels == 3;
  if (a.shape->strideW == 1)
    return rgb ? convolveChunk<M, P, 1, 3>(a, epi, c, t) : convolveChunk<M, P, 1, 0>(a, epi, c, t);
  rgb ? convolveChunk<M, P, 2, 3>(a, epi, c, t) : convolveChunk<M, P, 2, 0>(a, epi, c, t);
}

// Output blocks b0 .. b0 + M - 1 of one output row; `place` has the row's x, iy, w, b0 and the
// offset of its pixel 0; taps.ky0 / ky1 are the row's kernel rows inside X.
template <int M>
void convolveRowOfGroup(const NchwcConvArgs& a, const RegisterEpilogue& epi, ChunkPlace place,
                        TapRange taps) {
  const NchwcConvShape& s = *a.shape;
  const int64_t rowOut = place.out;
  // One pixel at a time over its kernel columns inside X.
  const auto single = [&](int64_t ox) {
    ChunkPlace c = place;
    c.ix = ox * s.strideW - s.padLeft;
    c.out = rowOut + ox * kBlock;
    TapRange t = taps;
    insideRange(c.ix, s.kernelW, s.dilationW, s.width, t.kx0, t.kx1);
    if (s.inChannels == 3)
      convolveBorderPixelRgb<M>(a, epi, c, t);
    else
      convolveChunk<M, 1, 1, 0>(a, epi, c, t);
  };
  // The interior [oxBegin, oxEnd): pixels whose kernel columns are all inside X.
  int64_t oxBegin = s.outWidth, oxEnd = s.outWidth;
  if (s.strideW <= 2) {
    oxBegin = std::min(s.outWidth, (s.padLeft + s.strideW - 1) / s.strideW);
    const int64_t lastStart =
        s.width - 1 - (s.kernelW - 1) * s.dilationW + s.padLeft;  // ox * strideW at most this
    oxEnd = lastStart < 0 ? oxBegin : std::clamp(lastStart / s.strideW + 1, oxBegin, s.outWidth);
  }
  for (int64_t ox = 0; ox < oxBegin; ++ox) single(ox);
  const int64_t interior = oxEnd - oxBegin;
  if (interior > 0) {
    constexpr int kMax = maxRegisterPixels(M);
    // Chunks as equal as possible: the first `longer` have one pixel more.
    const int64_t count = (interior + kMax - 1) / kMax, size = interior / count,
                  longer = interior % count;
    taps.kx0 = 0;
    taps.kx1 = s.kernelW;
    int64_t ox = oxBegin;
    for (int64_t k = 0; k < count; ++k) {
      const int64_t n = size + (k < longer ? 1 : 0);
      ChunkPlace c = place;
      c.ix = ox * s.strideW - s.padLeft;
      c.out = rowOut + ox * kBlock;
      convolveChunkOfSize<M, kMax>(a, epi, c, taps, n);
      ox += n;
    }
  }
  for (int64_t ox = oxEnd; ox < s.outWidth; ++ox) single(ox);
}

// Output row oy of `image`, all output blocks.
void convolveRow(const NchwcConvArgs& a, const RegisterEpilogue& epi, int64_t image, int64_t oy) {
  const NchwcConvShape& s = *a.shape;
  const int64_t outBlocks = s.outBlocks(), outPlane = s.outHeight * s.outWidth;
  const int64_t blockFloats =
      s.taps() * s.inChannels * kBlock;  // one output block's packed weights
  ChunkPlace place;
  place.x = a.x + image * s.inChannels * s.height * s.width;
  place.iy = oy * s.strideH - s.padTop;
  TapRange taps;
  insideRange(place.iy, s.kernelH, s.dilationH, s.height, taps.ky0, taps.ky1);
  for (int64_t g = 0; g < nchwcOutBlockGroups(outBlocks); ++g) {
    const NchwcBlockRange r = nchwcOutBlockGroup(outBlocks, g);
    place.w = a.weights + r.begin * blockFloats;
    place.b0 = r.begin;
    place.out = ((image * outBlocks + r.begin) * outPlane + oy * s.outWidth) * kBlock;
    switch (r.end - r.begin) {
      case 4:
        convolveRowOfGroup<4>(a, epi, place, taps);
        break;
      case 3:
        convolveRowOfGroup<3>(a, epi, place, taps);
        break;
      case 2:
        convolveRowOfGroup<2>(a, epi, place, taps);
        break;
      default:
        convolveRowOfGroup<1>(a, epi, place, taps);
        break;
    }
  }
  if (epi.rest) {
    for (int64_t b = 0; b < outBlocks; ++b) {
      float* y = a.y + ((image * outBlocks + b) * outPlane + oy * s.outWidth) * kBlock;
      applyEpilogueAvx512(a.act, y, s.outWidth * kBlock, nullptr, false, nullptr);
    }
  }
}

}  // namespace

void nchwcPlainConvAvx512(const NchwcConvArgs& a) {
  const NchwcConvShape& s = *a.shape;
  const RegisterEpilogue epi(a.act);
  // Rows cost the same (but for the few in the vertical padding): equal contiguous ranges.
  parallelFor(s.batch * s.outHeight, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) convolveRow(a, epi, r / s.outHeight, r % s.outHeight);
  });
}

}  // namespace kiln::cpu::detail
