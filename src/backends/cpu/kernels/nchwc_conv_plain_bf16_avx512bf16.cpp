// NchwcConv of a plain NCHW X (a CNN's first convolution, on an RGB image) in BF16 with FP32 sums
// (vdpbf16ps). A BF16 dot product takes two terms per 32-bit lane, but the stem has too few input
// channels to pair, so its pairs are two neighbouring kernel columns of one channel: X is first
// rewritten as "column pairs", word j of a row holding the padded row's columns j and j + 1 in
// BF16 (the horizontal padding is in the rewrite, so no pixel needs a border path), and the
// weights as [ky][column pair][ci][M][16] (nchwc_conv_bf16.h). A 7-wide kernel row is then 4
// pair taps instead of 7 FMA taps; an odd kernel's last pair has a zero weight in its high half,
// whose input half is masked to zero too (so an infinite pixel just outside the window cannot
// make 0 * inf). Register tiles of M output blocks x P pixels as in nchwc_conv_plain_avx512.cpp;
// rows in the vertical padding are skipped. Compiled with AVX512_BF16 flags.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "backends/cpu/activation_simd.h"
#include "backends/cpu/kernels/nchwc_conv.h"
#include "backends/cpu/kernels/nchwc_conv_avx512.h"
#include "backends/cpu/kernels/nchwc_conv_bf16.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu::detail {
namespace {

// Where one chunk of P pixels of an output row reads and writes.
struct PairChunk {
  const uint32_t* x;  // the image's column pairs [Ci][H][pairWidth], at the chunk's first pixel
  int64_t ky0, ky1;   // the kernel rows inside X
  int64_t iy;         // the input row of kernel row 0
  const uint32_t* w;  // the group's packed weights
  int64_t b0;         // the group's first output block
  int64_t out;        // float offset in Y (and Z) of the chunk's first pixel in block b0
};

template <int M, int P, int S>
inline void convolveChunk(const NchwcConvArgs& a, const RegisterEpilogue& epi, const PairChunk& c,
                          int64_t pairWidth) {
  const NchwcConvShape& s = *a.shape;
  const int64_t outBlockFloats = s.outHeight * s.outWidth * kBlock;
  const int64_t pairs = nchwcPlainBf16ColumnPairs(s.kernelW), ci = s.inChannels;
  const uint32_t lastMask = s.kernelW % 2 ? 0xFFFFu : 0xFFFFFFFFu;
  __m512 acc[M][P];
  startFromBias<M, P>(acc, a.bias, a.residual ? a.residual + c.out : nullptr, outBlockFloats, c.b0,
                      s.outChannels);
  for (int64_t ky = c.ky0; ky < c.ky1; ++ky) {
    const int64_t iy = c.iy + ky * s.dilationH;
    for (int64_t ch = 0; ch < ci; ++ch) {
      const uint32_t* row = c.x + (ch * s.height + iy) * pairWidth;
      for (int64_t kp = 0; kp < pairs; ++kp) {
        const uint32_t* wp = c.w + ((ky * pairs + kp) * ci + ch) * M * kBlock;
        __m512bh wv[M];
#pragma GCC unroll 4
        for (int m = 0; m < M; ++m) wv[m] = (__m512bh)_mm512_loadu_si512(wp + m * kBlock);
        const uint32_t mask = kp == pairs - 1 ? lastMask : 0xFFFFFFFFu;
        const uint32_t* xp = row + 2 * kp;
#pragma GCC unroll 16
        for (int p = 0; p < P; ++p) {
          const __m512bh v = (__m512bh)_mm512_set1_epi32(static_cast<int>(xp[p * S] & mask));
#pragma GCC unroll 4
          for (int m = 0; m < M; ++m) acc[m][p] = _mm512_dpbf16_ps(acc[m][p], wv[m], v);
        }
      }
    }
  }
  storeTile<M, P>(epi, acc, a.y + c.out, outBlockFloats);
}

template <int M, int P>
void convolveChunkOfSize(const NchwcConvArgs& a, const RegisterEpilogue& epi, const PairChunk& c,
                         int64_t pairWidth, int64_t n) {
  if constexpr (P > 1) {
    if (n < P) return convolveChunkOfSize<M, P - 1>(a, epi, c, pairWidth, n);
  }
  if (a.shape->strideW == 1) return convolveChunk<M, P, 1>(a, epi, c, pairWidth);
  convolveChunk<M, P, 2>(a, epi, c, pairWidth);
}

// One output row of output blocks b0 .. b0 + M - 1, in chunks of nearly equal size.
template <int M>
void convolveRowOfGroup(const NchwcConvArgs& a, const RegisterEpilogue& epi, PairChunk c,
                        int64_t pairWidth) {
  const NchwcConvShape& s = *a.shape;
  constexpr int kMax = maxRegisterPixels(M);
  const int64_t count = (s.outWidth + kMax - 1) / kMax, size = s.outWidth / count,
                longer = s.outWidth % count;
  const uint32_t* x = c.x;
  const int64_t out = c.out;
  for (int64_t k = 0, ox = 0; k < count; ++k) {
    const int64_t n = size + (k < longer ? 1 : 0);
    c.x = x + ox * s.strideW;
    c.out = out + ox * kBlock;
    convolveChunkOfSize<M, kMax>(a, epi, c, pairWidth, n);
    ox += n;
  }
}

// X [N, Ci, H, W] as column pairs [N, Ci, H, pairWidth] (nchwc_conv_bf16.h), over the pool:
// each row rounded to BF16 (nearest even, as the other BF16 kernels) into a zero-padded row of
// halves, then each two neighbouring halves as one word.
void writeColumnPairs(const NchwcConvShape& s, const float* x, uint32_t* pairs, int64_t pairWidth) {
  parallelFor(s.batch * s.inChannels * s.height, [&](int64_t r0, int64_t r1) {
    std::vector<uint16_t> padded(static_cast<size_t>(pairWidth + 1));
    const int64_t cols = std::min(s.width, pairWidth + 1 - s.padLeft);  // the columns read
    for (int64_t r = r0; r < r1; ++r) {
      const float* src = x + r * s.width;
      std::fill(padded.begin(), padded.end(), uint16_t{0});
      for (int64_t col = 0; col < cols; col += kBlock) {
        const __mmask16 lanes =
            static_cast<__mmask16>(cols - col >= kBlock ? 0xFFFF : (1u << (cols - col)) - 1);
        _mm256_mask_storeu_epi16(
            padded.data() + s.padLeft + col, lanes,
            (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lanes, src + col)));
      }
      uint32_t* dst = pairs + r * pairWidth;
      for (int64_t j = 0; j < pairWidth; ++j)
        dst[j] = uint32_t{padded[static_cast<size_t>(j)]} |
                 uint32_t{padded[static_cast<size_t>(j + 1)]} << 16;
    }
  });
}

}  // namespace

void nchwcPlainConvBf16Avx512(const NchwcConvArgs& a, const uint32_t* weights, uint32_t* pairs) {
  const NchwcConvShape& s = *a.shape;
  const int64_t pairWidth = nchwcPlainBf16PairWidth(s);
  writeColumnPairs(s, a.x, pairs, pairWidth);
  const RegisterEpilogue epi(a.act);
  const int64_t outBlocks = s.outBlocks(), outPlane = s.outHeight * s.outWidth;
  const int64_t groupWords =
      s.kernelH * nchwcPlainBf16ColumnPairs(s.kernelW) * s.inChannels * kBlock;  // per output block
  parallelFor(s.batch * s.outHeight, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t image = r / s.outHeight, oy = r % s.outHeight;
      PairChunk c;
      c.iy = oy * s.strideH - s.padTop;
      c.ky0 = c.iy >= 0 ? 0 : (-c.iy + s.dilationH - 1) / s.dilationH;
      c.ky1 = c.iy < s.height ? std::min(s.kernelH, (s.height - 1 - c.iy) / s.dilationH + 1) : 0;
      c.ky1 = std::max(c.ky1, c.ky0);
      for (int64_t g = 0; g < nchwcOutBlockGroups(outBlocks); ++g) {
        const NchwcBlockRange br = nchwcOutBlockGroup(outBlocks, g);
        c.x = pairs + image * s.inChannels * s.height * pairWidth;
        c.w = weights + br.begin * groupWords;
        c.b0 = br.begin;
        c.out = ((image * outBlocks + br.begin) * outPlane + oy * s.outWidth) * kBlock;
        switch (br.end - br.begin) {
          case 4:
            convolveRowOfGroup<4>(a, epi, c, pairWidth);
            break;
          case 3:
            convolveRowOfGroup<3>(a, epi, c, pairWidth);
            break;
          case 2:
            convolveRowOfGroup<2>(a, epi, c, pairWidth);
            break;
          default:
            convolveRowOfGroup<1>(a, epi, c, pairWidth);
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
  });
}

}  // namespace kiln::cpu::detail
