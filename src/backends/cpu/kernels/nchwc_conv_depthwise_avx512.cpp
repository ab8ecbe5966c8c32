// Depthwise NchwcConv on 16-float vectors: each vector is the 16 channels of a block, so every
// tap is one vector load and one FMA, with no broadcast. Square 3x3, 5x5 and 7x7 kernels without
// dilation (every depthwise layer of MobileNet and EfficientNet) take the fixed path: a task is a
// band of output rows of one channel block with the taps loaded once into registers; a row's
// interior columns are computed P at a time sliding along the input, each input vector loaded
// once and used by all the outputs it reaches, with no bounds checks; on the few border columns
// and rows the taps outside the input are skipped (one predictable branch per kernel row or
// column: on a 7x7 map, a 5x5 kernel has a third of its taps outside). Other kernels take the
// general path (one output row per task, taps outside the input skipped).
// X's padding channels are read with the rest: their outputs are zeroed before the store.
#include <immintrin.h>

#include <algorithm>
#include <utility>

#include "backends/cpu/activation_simd.h"
#include "backends/cpu/kernels/nchwc_conv.h"
#include "backends/cpu/kernels/nchwc_conv_avx512.h"
#include "backends/cpu/kernels/nchwc_conv_tiling.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu::detail {
namespace {

struct DepthwiseRow {
  const float* x;  // the image's channel block b: [H][W][16]
  const float* w;  // [tap][16]
  __m512 bias;
  int64_t kyBegin, kyEnd;  // taps rows that fall inside the input
  int64_t iyBase;          // input row of tap row 0
};

// P interior outputs from column ox (every tap inside the input); input columns S apart.
template <int S, int P>
inline void depthwiseInterior(const NchwcConvShape& s, const DepthwiseRow& r, int64_t ox,
                              __m512 (&acc)[P]) {
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
      for (int p = 0; p < P; ++p)
        acc[p] = _mm512_fmadd_ps(_mm512_loadu_ps(src + p * stride * kBlock), wv, acc[p]);
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
      acc = _mm512_fmadd_ps(_mm512_loadu_ps(row + ix * kBlock),
                            _mm512_loadu_ps(r.w + (ky * s.kernelW + kx) * kBlock), acc);
    }
  }
  return acc;
}

// One output row of channel block b, for any kernel (S == 0: any stride).
template <int S>
void depthwiseRow(const NchwcConvArgs& a, const RegisterEpilogue& epi, int64_t image, int64_t b,
                  int64_t oy) {
  const NchwcConvShape& s = *a.shape;
  DepthwiseRow r;
  r.x = a.x + (image * s.inBlocks() + b) * s.height * s.width * kBlock;
  r.w = a.weights + b * s.taps() * kBlock;
  r.bias = _mm512_loadu_ps(a.bias + b * kBlock);
  r.iyBase = oy * s.strideH - s.padTop;
  // ky with 0 <= iyBase + ky * dilation < H
  r.kyBegin = r.iyBase >= 0 ? 0 : (-r.iyBase + s.dilationH - 1) / s.dilationH;
  r.kyEnd =
      r.iyBase >= s.height ? 0 : std::min(s.kernelH, (s.height - 1 - r.iyBase) / s.dilationH + 1);
  r.kyEnd = std::max(r.kyEnd, r.kyBegin);
  // Interior columns: ox * stride - padLeft >= 0 and ox * stride - padLeft + (kW - 1) * dilation <
  // W.
  const int64_t reach = (s.kernelW - 1) * s.dilationW;
  int64_t oxBegin = (s.padLeft + s.strideW - 1) / s.strideW;
  int64_t oxEnd =
      s.width - 1 - reach + s.padLeft < 0 ? 0 : (s.width - 1 - reach + s.padLeft) / s.strideW + 1;
  oxBegin = std::min(oxBegin, s.outWidth);
  oxEnd = std::clamp(oxEnd, oxBegin, s.outWidth);

  const int64_t offset = ((image * s.outBlocks() + b) * s.outHeight + oy) * s.outWidth * kBlock;
  float* y = a.y + offset;
  const float* z = a.residual ? a.residual + offset : nullptr;
  const __mmask16 lanes = laneMask(b, s.outChannels);
  // The padding lanes read X's padding channels (anything): zeroed before the store.
  auto store = [&](int64_t ox, __m512 v) {
    _mm512_storeu_ps(
        y + ox * kBlock,
        _mm512_maskz_mov_ps(lanes, epi.apply(v, z ? z + ox * kBlock : nullptr, lanes)));
  };
  for (int64_t ox = 0; ox < oxBegin; ++ox) store(ox, depthwiseBorder(s, r, ox));
  int64_t ox = oxBegin;
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

// ---- Fixed path: square K x K kernel, horizontal stride S, no dilation. ----

#define KILN_INLINE inline __attribute__((always_inline))
#define KILN_LAMBDA_INLINE __attribute__((always_inline))

// f(integral_constant<int, 0>) ... f(integral_constant<int, N - 1>): indices known at compile
// time, so that accumulator and tap arrays stay in registers.
template <int N, typename F>
KILN_INLINE void staticFor(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) KILN_LAMBDA_INLINE {
    (f(std::integral_constant<int, I>{}), ...);
  }
  (std::make_integer_sequence<int, N>{});
}

// Outputs computed together in a row's interior: the accumulators next to the K * K taps in the
// 32 registers (a 7x7 kernel's taps do not fit: some are read from the stack).
template <int K>
constexpr int kMaxChunk = K <= 3 ? 8 : 4;

// What one task (a band of output rows of one channel block) works on.
struct FixedTask {
  const float* const* rows;  // the K input rows of the current output row (null outside)
  int kyBegin, kyEnd;        // the kernel rows inside the input
  float* y;                  // the output row
  const float* z;            // its residual row, or null
  __mmask16 lanes;
};

// Geometry of one call, shared by every task.
struct FixedPlan {
  int64_t oxBegin = 0, oxEnd = 0;  // interior columns: every tap inside the input
  int64_t bandRows = 1, bands = 1;
};

// P outputs from column ox (interior): one FMA per tap and output, its input read straight from
// L1 (an FMA with a memory operand costs no more than one with a register; loading each input
// once into a register for the P outputs it reaches would need more registers than the 32).
template <int K, int S, int P>
KILN_INLINE void interiorChunk(const NchwcConvShape& s, const FixedTask& t,
                               const __m512 (&taps)[K * K], __m512 bias,
                               const RegisterEpilogue& epi, int64_t ox) {
  __m512 acc[P];
  staticFor<P>([&](auto p) KILN_LAMBDA_INLINE { acc[p] = bias; });
  const int64_t ix0 = ox * S - s.padLeft;
  staticFor<K>([&](auto ky) KILN_LAMBDA_INLINE {
    if (ky < t.kyBegin || ky >= t.kyEnd) return;
    const float* row = t.rows[ky] + ix0 * kBlock;
    staticFor<K>([&](auto kx) KILN_LAMBDA_INLINE {
      staticFor<P>([&](auto p) KILN_LAMBDA_INLINE {
        acc[p] = _mm512_fmadd_ps(_mm512_loadu_ps(row + (p * S + kx) * kBlock), taps[ky * K + kx],
                                 acc[p]);
      });
    });
  });
  staticFor<P>([&](auto p) KILN_LAMBDA_INLINE {
    const int64_t o = (ox + p) * kBlock;
    _mm512_storeu_ps(
        t.y + o, _mm512_maskz_mov_ps(t.lanes, epi.apply(acc[p], t.z ? t.z + o : nullptr, t.lanes)));
  });
}

// One border output at column ox, the taps left or right of the input skipped; the taps are
// read from the block's weights w (in L1), so that the interior's tap registers never need an
// address (which would keep them on the stack).
template <int K, int S>
KILN_INLINE void borderPixel(const NchwcConvShape& s, const FixedTask& t, const float* w,
                             __m512 bias, const RegisterEpilogue& epi, int64_t ox) {
  __m512 acc = bias;
  const int64_t ix0 = ox * S - s.padLeft;
  for (int kx = 0; kx < K; ++kx) {
    const int64_t ix = ix0 + kx;
    if (ix < 0 || ix >= s.width) continue;
    for (int ky = t.kyBegin; ky < t.kyEnd; ++ky) {
      acc = _mm512_fmadd_ps(_mm512_loadu_ps(t.rows[ky] + ix * kBlock),
                            _mm512_loadu_ps(w + (ky * K + kx) * kBlock), acc);
    }
  }
  const int64_t o = ox * kBlock;
  _mm512_storeu_ps(t.y + o,
                   _mm512_maskz_mov_ps(t.lanes, epi.apply(acc, t.z ? t.z + o : nullptr, t.lanes)));
}

template <int K, int S>
KILN_INLINE void fixedRow(const NchwcConvShape& s, const FixedPlan& plan, const FixedTask& t,
                          const float* w, const __m512 (&taps)[K * K], __m512 bias,
                          const RegisterEpilogue& epi) {
  constexpr int P = kMaxChunk<K>;
  int64_t ox = 0;
  for (; ox < plan.oxBegin; ++ox) borderPixel<K, S>(s, t, w, bias, epi, ox);
  for (; ox + P <= plan.oxEnd; ox += P) interiorChunk<K, S, P>(s, t, taps, bias, epi, ox);
  if constexpr (P > 4) {
    if (ox + 4 <= plan.oxEnd) {
      interiorChunk<K, S, 4>(s, t, taps, bias, epi, ox);
      ox += 4;
    }
  }
  if (ox + 2 <= plan.oxEnd) {
    interiorChunk<K, S, 2>(s, t, taps, bias, epi, ox);
    ox += 2;
  }
  if (ox < plan.oxEnd) interiorChunk<K, S, 1>(s, t, taps, bias, epi, ox++);
  for (; ox < s.outWidth; ++ox) borderPixel<K, S>(s, t, w, bias, epi, ox);
}

// Output rows [band * bandRows, ...) of channel block b of one image.
template <int K, int S>
void fixedBand(const NchwcConvArgs& a, const FixedPlan& plan, const RegisterEpilogue& epi,
               int64_t image, int64_t b, int64_t band) {
  const NchwcConvShape& s = *a.shape;
  __m512 taps[K * K];
  const float* w = a.weights + b * K * K * kBlock;
  staticFor<K * K>([&](auto i) KILN_LAMBDA_INLINE { taps[i] = _mm512_loadu_ps(w + i * kBlock); });
  const __m512 bias = _mm512_loadu_ps(a.bias + b * kBlock);
  const float* x = a.x + (image * s.inBlocks() + b) * s.height * s.width * kBlock;
  const int64_t rowFloats = s.width * kBlock, outRowFloats = s.outWidth * kBlock;
  const int64_t plane = ((image * s.outBlocks() + b) * s.outHeight) * outRowFloats;
  const float* rows[K];
  FixedTask t{rows, 0, K, nullptr, nullptr, laneMask(b, s.outChannels)};
  const int64_t oyEnd = std::min(s.outHeight, (band + 1) * plan.bandRows);
  for (int64_t oy = band * plan.bandRows; oy < oyEnd; ++oy) {
    const int64_t iy0 = oy * s.strideH - s.padTop;
    t.kyBegin = static_cast<int>(std::clamp<int64_t>(-iy0, 0, K));
    t.kyEnd = static_cast<int>(std::clamp<int64_t>(s.height - iy0, t.kyBegin, K));
    for (int ky = 0; ky < K; ++ky)
      rows[ky] = ky >= t.kyBegin && ky < t.kyEnd ? x + (iy0 + ky) * rowFloats : nullptr;
    t.y = a.y + plane + oy * outRowFloats;
    t.z = a.residual ? a.residual + plane + oy * outRowFloats : nullptr;
    fixedRow<K, S>(s, plan, t, w, taps, bias, epi);
    // The activations done after the store (SiLU, Sigmoid, ...) run on the row while it is in L1.
    if (epi.rest) applyEpilogueAvx512(a.act, t.y, outRowFloats, nullptr, false, nullptr);
  }
}

template <int K, int S>
void runFixed(const NchwcConvArgs& a, const RegisterEpilogue& epi) {
  const NchwcConvShape& s = *a.shape;
  if (s.batch <= 0 || s.outBlocks() <= 0 || s.outHeight <= 0 || s.outWidth <= 0) return;
  FixedPlan plan;
  // Interior columns: ox * S - padLeft >= 0 and ox * S - padLeft + K - 1 < width.
  plan.oxBegin = std::min((s.padLeft + S - 1) / S, s.outWidth);
  const int64_t lastStart = s.width - K + s.padLeft;  // the largest ox * S with the window inside
  plan.oxEnd = lastStart < 0 ? 0 : std::clamp(lastStart / S + 1, plan.oxBegin, s.outWidth);
  // A task per channel plane when there are at least 8 per thread (so that a split into equal
  // numbers of tasks leaves little idle); else the planes are cut into bands of rows.
  const ThreadPool* pool = currentThreadPool();
  const int64_t threads = pool ? pool->size() : 1, planes = s.batch * s.outBlocks();
  const int64_t wanted =
      threads > 1 ? std::clamp<int64_t>((8 * threads + planes - 1) / planes, 1, s.outHeight) : 1;
  plan.bandRows = std::max<int64_t>((s.outHeight + wanted - 1) / wanted, 1);
  plan.bands = (s.outHeight + plan.bandRows - 1) / plan.bandRows;
  parallelFor(planes * plan.bands, [&](int64_t t0, int64_t t1) {
    forEachChunkTask(t0, t1, s.outBlocks(), plan.bands,
                     [&](int64_t image, int64_t b, int64_t band) {
                       fixedBand<K, S>(a, plan, epi, image, b, band);
                     });
  });
}

}  // namespace

void nchwcDepthwiseAvx512(const NchwcConvArgs& a) {
  const NchwcConvShape& s = *a.shape;
  const RegisterEpilogue epi(a.act);
  if (s.kernelH == s.kernelW && s.dilationH == 1 && s.dilationW == 1 &&
      (s.strideW == 1 || s.strideW == 2)) {
    const bool s1 = s.strideW == 1;
    switch (s.kernelH) {
      case 3:
        return s1 ? runFixed<3, 1>(a, epi) : runFixed<3, 2>(a, epi);
      case 5:
        return s1 ? runFixed<5, 1>(a, epi) : runFixed<5, 2>(a, epi);
      case 7:
        return s1 ? runFixed<7, 1>(a, epi) : runFixed<7, 2>(a, epi);
      default:
        break;
    }
  }
  const int64_t blocks = s.outBlocks(), rows = s.outHeight;
  auto run = [&](auto rowFn) {
    parallelFor(s.batch * blocks * rows, [&](int64_t t0, int64_t t1) {
      forEachChunkTask(t0, t1, blocks, rows,
                       [&](int64_t image, int64_t b, int64_t oy) { rowFn(a, epi, image, b, oy); });
    });
  };
  if (s.strideW == 1)
    run(depthwiseRow<1>);
  else if (s.strideW == 2)
    run(depthwiseRow<2>);
  else
    run(depthwiseRow<0>);
}

}  // namespace kiln::cpu::detail
