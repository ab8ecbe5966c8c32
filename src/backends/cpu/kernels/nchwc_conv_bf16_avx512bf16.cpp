// NchwcConv in BF16 with FP32 sums (vdpbf16ps), group 1, blocked X. X is first rounded to BF16
// in its own layout (a pixel's 16 channels become 8 pairs of BF16, one 32-bit lane each), the
// weights were packed as the FP32 direct kernel's with each two input channels of a block
// interleaved in one lane ([ci / 16][tap][pair][M][16 lanes]). A register tile of M output
// blocks x P pixels (as in nchwc_conv_avx512.cpp) then takes, per input-channel pair, M weight
// vectors and one broadcast pair per pixel: half the multiply instructions of the FP32 kernel.
// Tasks are (image, group of output blocks, chunk of pixels), chunks fastest, so that a thread
// runs its chunks over the same group's weights (in L2). Compiled with AVX512_BF16 flags; the
// shared pieces come from headers whose code is in unnamed namespaces.
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/activation_simd.h"
#include "backends/cpu/kernels/nchwc_conv.h"
#include "backends/cpu/kernels/nchwc_conv_avx512.h"
#include "backends/cpu/kernels/nchwc_conv_bf16.h"
#include "backends/cpu/kernels/nchwc_conv_tiling.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu::detail {
namespace {

constexpr int64_t kPairs = kBlock / 2;  // 32-bit lanes of BF16 pairs per pixel of a channel block

// What a pixel whose tap falls in the padding reads: 8 pairs of BF16 zeros.
alignas(64) const uint32_t kZeroPairs[kPairs] = {};

inline __m512bh asBf16(__m512i v) { return (__m512bh)v; }

// acc[m][p] += w[pair][m] . x_p[pair] for the 8 pairs of one channel block, weights [pair][M][16].
template <int M, int P>
inline void multiplyPairs(__m512 (&acc)[M][P], const uint32_t* const (&px)[P], const uint32_t* w) {
  for (int64_t c = 0; c < kPairs; ++c) {
    __m512bh wv[M];
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m) wv[m] = asBf16(_mm512_loadu_si512(w + (c * M + m) * kBlock));
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p) {
      const __m512bh v = asBf16(_mm512_set1_epi32(static_cast<int>(px[p][c])));
#pragma GCC unroll 4
      for (int m = 0; m < M; ++m) acc[m][p] = _mm512_dpbf16_ps(acc[m][p], wv[m], v);
    }
  }
}

// Output blocks b0 .. b0 + M - 1 (weights at `group`) for pixels q0 .. q0 + P - 1 of `image`.
template <int M, int P>
void convolveChunk(const NchwcConvArgs& a, const uint32_t* xPairs, const RegisterEpilogue& epi,
                   int64_t image, int64_t b0, const uint32_t* group, int64_t q0) {
  const NchwcConvShape& s = *a.shape;
  const int64_t outPlane = s.outHeight * s.outWidth, inPlane = s.height * s.width;
  const int64_t blockStride = outPlane * kBlock;
  const int64_t tile = ((image * s.outBlocks() + b0) * outPlane + q0) * kBlock;
  __m512 acc[M][P];
  startFromBias<M, P>(acc, a.bias, a.residual ? a.residual + tile : nullptr, blockStride, b0,
                      s.outChannels);
  const uint32_t* x = xPairs + image * s.inBlocks() * inPlane * kPairs;
  const uint32_t* px[P];
  if (s.pointwise()) {
    for (int64_t cb = 0; cb < s.inBlocks(); ++cb) {
      const uint32_t* plane = x + (cb * inPlane + q0) * kPairs;
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) px[p] = plane + p * kPairs;
      multiplyPairs<M, P>(acc, px, group + nchwcBlockedWeightOffset(1, 0, cb * kBlock, M) / 2);
    }
  } else {
    const ChunkOrigins<P> origins(s, q0, P);
    int64_t off[P];
    for (int64_t ky = 0; ky < s.kernelH; ++ky) {
      for (int64_t kx = 0; kx < s.kernelW; ++kx) {
        if (!origins.tapOffsets(s, ky, kx, off)) continue;
        const int64_t tap = ky * s.kernelW + kx;
        for (int64_t cb = 0; cb < s.inBlocks(); ++cb) {
          const uint32_t* plane = x + cb * inPlane * kPairs;
#pragma GCC unroll 16
          for (int p = 0; p < P; ++p) px[p] = off[p] < 0 ? kZeroPairs : plane + off[p] * kPairs;
          multiplyPairs<M, P>(acc, px,
                              group + nchwcBlockedWeightOffset(s.taps(), tap, cb * kBlock, M) / 2);
        }
      }
    }
  }
  storeTile<M, P>(epi, acc, a.y + tile, blockStride);
}

// convolveChunk<M, n> for the run-time n <= P.
template <int M, int P>
void convolveChunkOfSize(const NchwcConvArgs& a, const uint32_t* xPairs,
                         const RegisterEpilogue& epi, int64_t image, int64_t b0,
                         const uint32_t* group, int64_t q0, int64_t n) {
  if constexpr (P > 1) {
    if (n < P) return convolveChunkOfSize<M, P - 1>(a, xPairs, epi, image, b0, group, q0, n);
  }
  convolveChunk<M, P>(a, xPairs, epi, image, b0, group, q0);
}

// X [N, Cb, H, W, 16] float32 rounded to BF16 in the same order (nearest even; subnormals to
// zero), its padding channels (which may hold anything) as zeros: the pairs multiply them too.
void roundInput(const NchwcConvShape& s, const float* x, uint32_t* pairs) {
  const int64_t plane = s.height * s.width;
  parallelFor(s.batch * s.inBlocks(), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const __mmask16 lanes = laneMask(b % s.inBlocks(), s.inChannels);
      for (int64_t p = b * plane; p < (b + 1) * plane; ++p) {
        _mm256_storeu_si256(
            reinterpret_cast<__m256i*>(pairs + p * kPairs),
            (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lanes, x + p * kBlock)));
      }
    }
  });
}

}  // namespace

void nchwcConvBf16Avx512(const NchwcConvArgs& a, const uint32_t* weights, uint32_t* xPairs) {
  const NchwcConvShape& s = *a.shape;
  roundInput(s, a.x, xPairs);
  const RegisterEpilogue epi(a.act);
  const int64_t outBlocks = s.outBlocks(), groups = nchwcOutBlockGroups(outBlocks);
  const int64_t widest = nchwcOutBlockGroup(outBlocks, groups - 1).end -
                         nchwcOutBlockGroup(outBlocks, groups - 1).begin;
  const PixelChunks chunks(s.outHeight * s.outWidth, maxRegisterPixels(widest));
  const int64_t blockWords =
      s.taps() * s.inBlocks() * kBlock * kBlock / 2;  // one output block's packed weights
  parallelFor(s.batch * groups * chunks.count, [&](int64_t t0, int64_t t1) {
    forEachChunkTask(t0, t1, groups, chunks.count, [&](int64_t image, int64_t g, int64_t c) {
      const NchwcBlockRange r = nchwcOutBlockGroup(outBlocks, g);
      const uint32_t* group = weights + r.begin * blockWords;
      const int64_t q0 = chunks.begin(c), n = chunks.length(c);
      switch (r.end - r.begin) {
        case 4:
          convolveChunkOfSize<4, maxRegisterPixels(4)>(a, xPairs, epi, image, r.begin, group, q0,
                                                       n);
          break;
        case 3:
          convolveChunkOfSize<3, maxRegisterPixels(3)>(a, xPairs, epi, image, r.begin, group, q0,
                                                       n);
          break;
        case 2:
          convolveChunkOfSize<2, maxRegisterPixels(2)>(a, xPairs, epi, image, r.begin, group, q0,
                                                       n);
          break;
        default:
          convolveChunkOfSize<1, maxRegisterPixels(1)>(a, xPairs, epi, image, r.begin, group, q0,
                                                       n);
          break;
      }
      if (epi.rest) {  // activations not done in registers, over the chunk's stored pixels
        for (int64_t b = r.begin; b < r.end; ++b) {
          float* y = a.y + ((image * outBlocks + b) * s.outHeight * s.outWidth + q0) * kBlock;
          applyEpilogueAvx512(a.act, y, n * kBlock, nullptr, false, nullptr);
        }
      }
    });
  });
}

}  // namespace kiln::cpu::detail
