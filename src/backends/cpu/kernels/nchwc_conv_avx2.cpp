// NchwcConv on 8-float vectors (the AVX2 baseline; each 16-channel block is two vectors). One
// output block at a time for a chunk of up to 6 pixels: 12 accumulators started from the bias,
// each input channel's value broadcast once per pixel and multiplied by the block's two weight
// vectors. The activation runs as a second pass over the chunk while it is in L1. A grouped
// convolution runs slice by slice (nchwc_conv_grouped.h).
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/kernels/nchwc_conv.h"
#include "backends/cpu/kernels/nchwc_conv_grouped.h"
#include "backends/cpu/kernels/nchwc_conv_tiling.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu::detail {
namespace {

constexpr int kMaxPixels = 6;
constexpr int64_t kBlock = 16;

// All-ones in the lanes of block `b` that hold real channels (of `channels`), zero past them.
struct LaneMask {
  __m256 lo, hi;
  LaneMask(int64_t b, int64_t channels) {
    const int64_t valid = std::clamp<int64_t>(channels - b * kBlock, 0, kBlock);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    lo = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid)), lane));
    hi = _mm256_castsi256_ps(
        _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid) - 8), lane));
  }
};

// Adds the residual (its padding lanes masked off, they may hold anything), zeroes the padding
// lanes when asked, stores n pixels of one block and applies the activation to them.
template <int P>
void finishChunk(const NchwcConvArgs& a, const LaneMask& mask, bool maskOutput, const __m256* lo,
                 const __m256* hi, int64_t outOffset, int n) {
  float* y = a.y + outOffset;
  const float* z = a.residual ? a.residual + outOffset : nullptr;
  for (int p = 0; p < P && p < n; ++p) {
    __m256 l = lo[p], h = hi[p];
    if (z) {
      l = _mm256_add_ps(l, _mm256_and_ps(_mm256_loadu_ps(z + p * kBlock), mask.lo));
      h = _mm256_add_ps(h, _mm256_and_ps(_mm256_loadu_ps(z + p * kBlock + 8), mask.hi));
    }
    if (maskOutput) {
      l = _mm256_and_ps(l, mask.lo);
      h = _mm256_and_ps(h, mask.hi);
    }
    _mm256_storeu_ps(y + p * kBlock, l);
    _mm256_storeu_ps(y + p * kBlock + 8, h);
  }
  if (a.act.kind != ActivationKind::kNone) applyEpilogue(a.act, y, n * kBlock, 0.0f, nullptr);
}

// lo/hi[p] += w[ci] * x_p[ci] for ci < count, the block's weights wStep floats apart.
template <int P>
inline void multiplyChannels(__m256* lo, __m256* hi, const float* const* px, const float* w,
                             int64_t count, int64_t wStep) {
  for (int64_t ci = 0; ci < count; ++ci) {
    const __m256 wl = _mm256_loadu_ps(w + ci * wStep), wh = _mm256_loadu_ps(w + ci * wStep + 8);
    for (int p = 0; p < P; ++p) {
      const __m256 v = _mm256_set1_ps(px[p][ci]);
      lo[p] = _mm256_fmadd_ps(wl, v, lo[p]);
      hi[p] = _mm256_fmadd_ps(wh, v, hi[p]);
    }
  }
}

// Output block b (block m of a group of M) for pixels q0 .. q0 + n - 1 of image `image`.
// Blocked X: a pixel's 16 channels are adjacent, and a pixel in the padding reads zeros. Plain X
// (padded by nchwcConv, [Hp][Wp][Ci]): every tap is inside it, a kernel row's kW * Ci values
// contiguous when there is no dilation.
template <int P>
void convolveChunk(const NchwcConvArgs& a, int64_t image, int64_t b, int64_t m, int64_t M,
                   const float* group, int64_t q0, int n) {
  const NchwcConvShape& s = *a.shape;
  const int64_t inPlane = s.height * s.width;
  const int64_t ciStride = s.plainInput ? s.inChannels : s.inBlocks() * kBlock;
  const int64_t wStep = M * kBlock;  // floats from one input channel's weights to the next
  const ChunkOrigins<P> origins(s, q0, n);
  __m256 lo[P], hi[P];
  for (int p = 0; p < P; ++p) {
    lo[p] = _mm256_loadu_ps(a.bias + b * kBlock);
    hi[p] = _mm256_loadu_ps(a.bias + b * kBlock + 8);
  }
  const float* x = a.x + image * ciStride * inPlane;
  const int64_t run =
      s.plainInput && s.dilationW == 1 ? s.kernelW : 1;  // kernel columns read as one run
  int64_t off[P];
  const float* px[P];
  for (int64_t ky = 0; ky < s.kernelH; ++ky) {
    for (int64_t kx = 0; kx < s.kernelW; kx += run) {
      if (!origins.tapOffsets(s, ky, kx, off)) continue;
      const int64_t tap = ky * s.kernelW + kx;
      if (s.plainInput) {
        for (int p = 0; p < P; ++p) px[p] = x + off[p] * s.inChannels;
        multiplyChannels<P>(lo, hi, px, group + tap * ciStride * wStep + m * kBlock,
                            run * s.inChannels, wStep);
        continue;
      }
      for (int64_t c0 = 0; c0 < s.inChannels; c0 += kBlock) {
        for (int p = 0; p < P; ++p)
          px[p] = off[p] < 0 ? kNchwcZeros : x + c0 * inPlane + off[p] * kBlock;
        multiplyChannels<P>(lo, hi, px,
                            group + nchwcBlockedWeightOffset(s.taps(), tap, c0, M) + m * kBlock,
                            std::min(kBlock, s.inChannels - c0), wStep);
      }
    }
  }
  const int64_t outOffset = ((image * s.outBlocks() + b) * s.outHeight * s.outWidth + q0) * kBlock;
  finishChunk<P>(a, LaneMask(b, s.outChannels), false, lo, hi, outOffset, n);
}

// Depthwise: block b's 16 channels for pixels q0 .. q0 + n - 1, whole vectors of input loaded
// (the padding channels of X are read, and their outputs zeroed before the store).
template <int P>
void convolveDepthwiseChunk(const NchwcConvArgs& a, int64_t image, int64_t b, int64_t q0, int n) {
  const NchwcConvShape& s = *a.shape;
  const int64_t inPlane = s.height * s.width;
  const ChunkOrigins<P> origins(s, q0, n);
  __m256 lo[P], hi[P];
  for (int p = 0; p < P; ++p) {
    lo[p] = _mm256_loadu_ps(a.bias + b * kBlock);
    hi[p] = _mm256_loadu_ps(a.bias + b * kBlock + 8);
  }
  const float* x = a.x + (image * s.inBlocks() + b) * inPlane * kBlock;
  const float* w = a.weights + b * s.taps() * kBlock;
  int64_t off[P];
  for (int64_t ky = 0; ky < s.kernelH; ++ky) {
    for (int64_t kx = 0; kx < s.kernelW; ++kx) {
      if (!origins.tapOffsets(s, ky, kx, off)) continue;
      const float* wt = w + (ky * s.kernelW + kx) * kBlock;
      const __m256 wl = _mm256_loadu_ps(wt), wh = _mm256_loadu_ps(wt + 8);
      for (int p = 0; p < P; ++p) {
        const float* src = off[p] < 0 ? kNchwcZeros : x + off[p] * kBlock;
        lo[p] = _mm256_fmadd_ps(wl, _mm256_loadu_ps(src), lo[p]);
        hi[p] = _mm256_fmadd_ps(wh, _mm256_loadu_ps(src + 8), hi[p]);
      }
    }
  }
  const int64_t outOffset = ((image * s.outBlocks() + b) * s.outHeight * s.outWidth + q0) * kBlock;
  finishChunk<P>(a, LaneMask(b, s.outChannels), true, lo, hi, outOffset, n);
}

}  // namespace

void nchwcConvAvx2(const NchwcConvArgs& a) {
  const NchwcConvShape& s = *a.shape;
  const PixelChunks chunks(s.outHeight * s.outWidth, kMaxPixels);
  const int64_t outBlocks = s.outBlocks();
  if (s.depthwise) {
    parallelFor(s.batch * outBlocks * chunks.count, [&](int64_t t0, int64_t t1) {
      forEachChunkTask(t0, t1, outBlocks, chunks.count, [&](int64_t image, int64_t b, int64_t c) {
        convolveDepthwiseChunk<kMaxPixels>(a, image, b, chunks.begin(c),
                                           static_cast<int>(chunks.length(c)));
      });
    });
    return;
  }
  // Each (image, slice) is a convolution of its own (one slice unless grouped:
  // nchwc_conv_grouped.h).
  const int64_t slices = s.slices();
  const NchwcConvShape first = nchwcSliceShape(s, 0);  // the sizes of every slice's blocks
  const int64_t sliceOutBlocks = first.outBlocks(), groups = nchwcOutBlockGroups(sliceOutBlocks);
  const int64_t ciStride = s.plainInput ? s.inChannels : first.inBlocks() * kBlock;
  const int64_t blockFloats = s.taps() * ciStride * kBlock;  // one output block's packed weights
  parallelFor(s.batch * slices * groups * chunks.count, [&](int64_t t0, int64_t t1) {
    forEachChunkTask(t0, t1, groups, chunks.count, [&](int64_t task, int64_t g, int64_t c) {
      const NchwcConvShape slice = nchwcSliceShape(s, task % slices);
      const NchwcConvArgs sliced = nchwcSliceArgs(a, slice, task / slices, task % slices);
      const NchwcBlockRange r = nchwcOutBlockGroup(sliceOutBlocks, g);
      for (int64_t b = r.begin; b < r.end; ++b) {
        convolveChunk<kMaxPixels>(sliced, 0, b, b - r.begin, r.end - r.begin,
                                  sliced.weights + r.begin * blockFloats, chunks.begin(c),
                                  static_cast<int>(chunks.length(c)));
      }
    });
  });
}

}  // namespace kiln::cpu::detail
