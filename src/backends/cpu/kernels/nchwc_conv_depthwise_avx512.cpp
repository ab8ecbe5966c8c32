// Depthwise NchwcConv on 16-float vectors: each vector is the 16 channels of a block, so every
// tap is one vector load and one FMA, with no broadcast. One output row per task; the columns
// whose taps all fall inside the input are computed 8 (or 4) at a time without checks, for 3x3
// and 5x5 kernels with their taps held in registers; border columns skip the taps outside.
// X's padding channels are read with the rest: their outputs are zeroed before the store.
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/activation_simd.h"
#include "backends/cpu/kernels/nchwc_conv.h"
#include "backends/cpu/kernels/nchwc_conv_avx512.h"
#include "backends/cpu/kernels/nchwc_conv_tiling.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu::detail {
namespace {

struct DepthwiseRow {
  const float* x;      // the image's channel block b: [H][W][16]
  const float* w;      // [tap][16]
  __m512 bias;
  int64_t kyBegin, kyEnd;  // taps rows that fall inside the input
  int64_t iyBase;          // input row of tap row 0
};

// P interior outputs from column ox (every tap inside the input); input columns S apart.
template <int S, int P>
inline void depthwiseInterior(const NchwcConvShape& s, const DepthwiseRow& r, int64_t ox, __m512 (&acc)[P]) {
  const int64_t stride = S > 0 ? S : s.strideW;
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) acc[p] = r.bias;
  const int64_t ix0 = ox * s.strideW - s.padLeft;
  for (int64_t ky = r.kyBegin; ky < r.kyEnd; ++ky) {
    const float* row = r.x + ((r.iyBase + ky * s.dilationH) * s.width + ix0) * kBlock;
    const float* w = r.w + ky * s.kernelW * kBlock;
    for (int64_t kx = 0; kx < s.kernelW; ++kx) {
      const __m512 wv = _mm512_loadu_ps(w + kx * kBlock);
      const float* src = row + kx * s.dilationW * kBlock;
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) acc[p] = _mm512_fmadd_ps(_mm512_loadu_ps(src + p * stride * kBlock), wv, acc[p]);
    }
  }
}

// The same for a K x K kernel (no dilation) on a row where every tap row is inside the input,
// the taps in registers and the loops unrolled.
template <int K, int S, int P>
inline void depthwiseInteriorFixed(const NchwcConvShape& s, const DepthwiseRow& r, const __m512 (&taps)[K * K],
                                   int64_t ox, __m512 (&acc)[P]) {
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) acc[p] = r.bias;
  const float* row = r.x + (r.iyBase * s.width + ox * S - s.padLeft) * kBlock;
#pragma GCC unroll 5
  for (int ky = 0; ky < K; ++ky) {
#pragma GCC unroll 5
    for (int kx = 0; kx < K; ++kx) {
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        acc[p] = _mm512_fmadd_ps(_mm512_loadu_ps(row + (ky * s.width + p * S + kx) * kBlock), taps[ky * K + kx], acc[p]);
      }
    }
  }
}

// One output at column ox, taps outside the input skipped.
inline __m512 depthwiseBorder(const NchwcConvShape& s, const DepthwiseRow& r, int64_t ox) {
  __m512 acc = r.bias;
  const int64_t ix0 = ox * s.strideW - s.padLeft;
  for (int64_t ky = r.kyBegin; ky < r.kyEnd; ++ky) {
    const float* row = r.x + (r.iyBase + ky * s.dilationH) * s.width * kBlock;
    for (int64_t kx = 0; kx < s.kernelW; ++kx) {
      const int64_t ix = ix0 + kx * s.dilationW;
      if (ix < 0 || ix >= s.width) continue;
      acc = _mm512_fmadd_ps(_mm512_loadu_ps(row + ix * kBlock), _mm512_loadu_ps(r.w + (ky * s.kernelW + kx) * kBlock), acc);
    }
  }
  return acc;
}

// One output row of channel block b. K > 0: a K x K kernel with stride S and no dilation;
// K == 0: any kernel (S == 0: any stride).
template <int K, int S>
void depthwiseRow(const NchwcConvArgs& a, const RegisterEpilogue& epi, int64_t image, int64_t b, int64_t oy) {
  const NchwcConvShape& s = *a.shape;
  DepthwiseRow r;
  r.x = a.x + (image * s.inBlocks() + b) * s.height * s.width * kBlock;
  r.w = a.weights + b * s.taps() * kBlock;
  r.bias = _mm512_loadu_ps(a.bias + b * kBlock);
  r.iyBase = oy * s.strideH - s.padTop;
  // ky with 0 <= iyBase + ky * dilation < H
  r.kyBegin = r.iyBase >= 0 ? 0 : (-r.iyBase + s.dilationH - 1) / s.dilationH;
  r.kyEnd = r.iyBase >= s.height ? 0 : std::min(s.kernelH, (s.height - 1 - r.iyBase) / s.dilationH + 1);
  r.kyEnd = std::max(r.kyEnd, r.kyBegin);
  // Interior columns: ox * stride - padLeft >= 0 and ox * stride - padLeft + (kW - 1) * dilation < W.
  const int64_t reach = (s.kernelW - 1) * s.dilationW;
  int64_t oxBegin = (s.padLeft + s.strideW - 1) / s.strideW;
  int64_t oxEnd = s.width - 1 - reach + s.padLeft < 0 ? 0 : (s.width - 1 - reach + s.padLeft) / s.strideW + 1;
  oxBegin = std::min(oxBegin, s.outWidth);
  oxEnd = std::clamp(oxEnd, oxBegin, s.outWidth);

  const int64_t offset = ((image * s.outBlocks() + b) * s.outHeight + oy) * s.outWidth * kBlock;
  float* y = a.y + offset;
  const float* z = a.residual ? a.residual + offset : nullptr;
  const __mmask16 lanes = laneMask(b, s.outChannels);
  // The padding lanes read X's padding channels (anything): zeroed before the store.
  auto store = [&](int64_t ox, __m512 v) {
    _mm512_storeu_ps(y + ox * kBlock, _mm512_maskz_mov_ps(lanes, epi.apply(v, z ? z + ox * kBlock : nullptr, lanes)));
  };
  for (int64_t ox = 0; ox < oxBegin; ++ox) store(ox, depthwiseBorder(s, r, ox));
  int64_t ox = oxBegin;
  if constexpr (K > 0) {
    if (r.kyBegin == 0 && r.kyEnd == K) {
      __m512 taps[K * K];
#pragma GCC unroll 25
      for (int t = 0; t < K * K; ++t) taps[t] = _mm512_loadu_ps(r.w + t * kBlock);
      constexpr int P = K <= 3 ? 8 : 4;  // accumulators next to the K * K taps in the 32 registers
      for (; ox + P <= oxEnd; ox += P) {
        __m512 acc[P];
        depthwiseInteriorFixed<K, S, P>(s, r, taps, ox, acc);
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) store(ox + p, acc[p]);
      }
      for (; ox < oxEnd; ++ox) {
        __m512 acc[1];
        depthwiseInteriorFixed<K, S, 1>(s, r, taps, ox, acc);
        store(ox, acc[0]);
      }
    }
  }
  for (; ox + 8 <= oxEnd; ox += 8) {
    __m512 acc[8];
    depthwiseInterior<S, 8>(s, r, ox, acc);
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) store(ox + p, acc[p]);
  }
  for (; ox + 4 <= oxEnd; ox += 4) {
    __m512 acc[4];
    depthwiseInterior<S, 4>(s, r, ox, acc);
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) store(ox + p, acc[p]);
  }
  for (; ox < oxEnd; ++ox) {
    __m512 acc[1];
    depthwiseInterior<S, 1>(s, r, ox, acc);
    store(ox, acc[0]);
  }
  for (; ox < s.outWidth; ++ox) store(ox, depthwiseBorder(s, r, ox));
  if (epi.rest) applyEpilogueAvx512(a.act, y, s.outWidth * kBlock, nullptr, false, nullptr);
}

}  // namespace

void nchwcDepthwiseAvx512(const NchwcConvArgs& a) {
  const NchwcConvShape& s = *a.shape;
  const RegisterEpilogue epi(a.act);
  const int64_t blocks = s.outBlocks(), rows = s.outHeight;
  auto run = [&](auto rowFn) {
    parallelFor(s.batch * blocks * rows, [&](int64_t t0, int64_t t1) {
      forEachChunkTask(t0, t1, blocks, rows, [&](int64_t image, int64_t b, int64_t oy) { rowFn(a, epi, image, b, oy); });
    });
  };
  const bool square = s.kernelH == s.kernelW && s.strideH == s.strideW && s.dilationH == 1 && s.dilationW == 1;
  if (square && s.kernelH == 3 && s.strideW == 1) run(depthwiseRow<3, 1>);
  else if (square && s.kernelH == 3 && s.strideW == 2) run(depthwiseRow<3, 2>);
  else if (square && s.kernelH == 5 && s.strideW == 1) run(depthwiseRow<5, 1>);
  else if (square && s.kernelH == 5 && s.strideW == 2) run(depthwiseRow<5, 2>);
  else if (s.strideW == 1) run(depthwiseRow<0, 1>);
  else if (s.strideW == 2) run(depthwiseRow<0, 2>);
  else run(depthwiseRow<0, 0>);
}

}  // namespace kiln::cpu::detail
