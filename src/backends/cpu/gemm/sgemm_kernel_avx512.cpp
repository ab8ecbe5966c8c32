// f32_gemm_14x32_avx512: 14 rows x 32 columns of C in 28 zmm accumulators, two B vectors per k
// and each A value broadcast straight from memory into the FMA. Compiled with AVX-512 flags (the
// *_avx512.cpp rule in CMakeLists.txt) and called only when the CPU has AVX-512, so this file
// includes no header that instantiates shared inline code (it would be merged with the AVX2 copy).
#include <immintrin.h>

#include "backends/cpu/gemm/gemm_tile_store_avx512.h"
#include "backends/cpu/gemm/sgemm_kernels.h"
#include "backends/cpu/gemm/transpose16x16_avx512.h"

namespace kiln::cpu {
namespace {

constexpr int kMR = 14;
constexpr int kNR = 32;

// B strips stream from L2, fetched 8 steps ahead (two lines a step). A B packed whole beforehand
// (weights) is read from memory once per call instead: kFarB also fetches it 64 steps (8 KiB)
// ahead into L2, which the DRAM latency needs (BERT's 128 x 3072 x 768 with weights out of
// cache: 4.31 -> 4.03 ms); with B already in L2 that costs about 0.5 %, so only then.
// kHalves: the 16-float halves of each step the tile reads.
template <bool kFarB, int kHalves>
inline void prefetchB(const float* b) {
#pragma GCC unroll 2
  for (int h = 0; h < kHalves; ++h) {
    _mm_prefetch(reinterpret_cast<const char*>(b + kNR * 8 + 16 * h), _MM_HINT_T0);
    if constexpr (kFarB)
      _mm_prefetch(reinterpret_cast<const char*>(b + kNR * 64 + 16 * h), _MM_HINT_T1);
  }
}

// A tile of at most 16 columns (the narrow edge of C, or C itself when N is small, as for
// Winograd's few tiles per 7x7 image): only the first B vector of each step is used, halving the
// FMAs that a full-width tile would spend on zero padding.
template <int R, bool kFarB>
void tile14x16(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t cols,
               bool accumulate) {
  __m512 acc[R];
#pragma GCC unroll 14
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; ++k) {
    prefetchB<kFarB, 1>(b);
    const __m512 b0 = _mm512_loadu_ps(b);
#pragma GCC unroll 14
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(a[r]), b0, acc[r]);
    a += kMR;
    b += kNR;
  }
  storeTile16<R>(acc, c, ldc, cols, accumulate);
}

template <int R, bool kFarB>
void tile14x32(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t cols,
               bool accumulate) {
  if (cols <= 16) return tile14x16<R, kFarB>(kc, a, b, c, ldc, cols, accumulate);
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 14
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
#pragma GCC unroll 14
  for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; ++k) {
    prefetchB<kFarB, 2>(b);
    const __m512 b0 = _mm512_loadu_ps(b);
    const __m512 b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 14
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r]);
      acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);
    }
    a += kMR;
    b += kNR;
  }
  storeTile32<R>(acc0, acc1, c, ldc, cols, accumulate);
}

template <bool kFarB>
void kernel14x32(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t rows,
                 int64_t cols, bool accumulate) {
  switch (rows) {
    case 14:
      return tile14x32<14, kFarB>(kc, a, b, c, ldc, cols, accumulate);
    case 13:
      return tile14x32<13, kFarB>(kc, a, b, c, ldc, cols, accumulate);
    case 12:
      return tile14x32<12, kFarB>(kc, a, b, c, ldc, cols, accumulate);
    case 11:
      return tile14x32<11, kFarB>(kc, a, b, c, ldc, cols, accumulate);
    case 10:
      return tile14x32<10, kFarB>(kc, a, b, c, ldc, cols, accumulate);
    case 9:
      return tile14x32<9, kFarB>(kc, a, b, c, ldc, cols, accumulate);
    case 8:
      return tile14x32<8, kFarB>(kc, a, b, c, ldc, cols, accumulate);
    case 7:
      return tile14x32<7, kFarB>(kc, a, b, c, ldc, cols, accumulate);
    case 6:
      return tile14x32<6, kFarB>(kc, a, b, c, ldc, cols, accumulate);
    case 5:
      return tile14x32<5, kFarB>(kc, a, b, c, ldc, cols, accumulate);
    case 4:
      return tile14x32<4, kFarB>(kc, a, b, c, ldc, cols, accumulate);
    case 3:
      return tile14x32<3, kFarB>(kc, a, b, c, ldc, cols, accumulate);
    case 2:
      return tile14x32<2, kFarB>(kc, a, b, c, ldc, cols, accumulate);
    default:
      return tile14x32<1, kFarB>(kc, a, b, c, ldc, cols, accumulate);
  }
}

// GCC 12 warns that the shuffle intrinsics' own `_mm512_undefined_*` pass-through "may be used
// uninitialized" (a GCC 12 false positive); nothing here is.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// A strip of 14 rows: 16 depths of each row are loaded at once (one cache line when aligned),
// the 16x16 block (rows 14 and 15 zero) is transposed and each depth's 14 values stored.
void packStrip14(int64_t rows, bool trans, const float* src, int64_t lda, int64_t kc, float alpha,
                 float* dst) {
  const __m512 scale = _mm512_set1_ps(alpha);
  const __mmask16 stripMask = __mmask16((1u << kMR) - 1);
  const __mmask16 rowMask = __mmask16((1u << rows) - 1);
  if (trans) {  // op(A)(r, k) = src[k * lda + r]: each depth's rows are contiguous
    for (int64_t k = 0; k < kc; ++k) {
      const __m512 depth = _mm512_mul_ps(scale, _mm512_maskz_loadu_ps(rowMask, src + k * lda));
      _mm512_mask_storeu_ps(dst + k * kMR, stripMask, depth);
    }
    return;
  }
  for (int64_t k = 0; k < kc; k += 16) {
    const int64_t depth = kc - k < 16 ? kc - k : 16;
    const __mmask16 depthMask = depth == 16 ? __mmask16(0xFFFF) : __mmask16((1u << depth) - 1);
    __m512 r[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      r[i] = i < rows ? _mm512_mul_ps(scale, _mm512_maskz_loadu_ps(depthMask, src + i * lda + k))
                      : _mm512_setzero_ps();
    }
    transpose16x16(r);
#pragma GCC unroll 16
    for (int t = 0; t < 16; ++t) {
      if (t < depth) _mm512_mask_storeu_ps(dst + (k + t) * kMR, stripMask, r[t]);
    }
  }
}

#pragma GCC diagnostic pop

}  // namespace

const SgemmKernelInfo& sgemmKernelAvx512() {
  // KC: a 14 x 256 A strip is 14 KiB of the 48 KiB L1; NC: a 256 x 1024 B panel is 1 MiB of the
  // 2 MiB L2 (measured on Sapphire Rapids; 384 and 512 were no faster).
  static const SgemmKernelInfo info{
      CpuIsa::kAvx512, "f32_gemm_14x32_avx512", kMR, kNR, 256, 504, 1024, true, kernel14x32<false>,
      packStrip14,     kernel14x32<true>};
  return info;
}

}  // namespace kiln::cpu
