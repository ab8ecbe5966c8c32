// bf16_gemm_14x32_avx512bf16: 14 rows x 32 columns of C in 28 zmm accumulators; per depth pair
// two B vectors (16 columns x 2 depths each) and one A pair broadcast into vdpbf16ps, which adds
// both products of each lane to its FP32 accumulator (the tile: bf16_gemm_kernels.h). Also the
// run-time packers, which round float32 to BF16 with vcvtne2ps2bf16 (nearest even; like vdpbf16ps
// it treats subnormals as zero). Compiled with AVX512_BF16 flags and called only when the CPU has
// it, so this file includes no header that instantiates shared inline code.
#include <immintrin.h>

#include <utility>

#include "backends/cpu/gemm/bf16_gemm_kernels.h"
#include "backends/cpu/gemm/gemm_tile_store_avx512.h"
#include "backends/cpu/gemm/transpose16x16_avx512.h"

namespace kiln::cpu {
namespace {

constexpr int kNrVectors = kBf16GemmNrVectors;
constexpr int kNR = static_cast<int>(kBf16GemmNr);
constexpr int kMR = static_cast<int>(kBf16GemmMr);
static_assert(kNR == 32 && kMR == 14, "the tile code below is written for 2 B vectors and 14 rows");

inline __m512bh asBf16(__m512i v) { return (__m512bh)v; }

// Fetches the B strip 8 pairs ahead (one or two lines a pair).
template <int kHalves>
inline void prefetchB(const uint32_t* b) {
#pragma GCC unroll 2
  for (int h = 0; h < kHalves; ++h)
    _mm_prefetch(reinterpret_cast<const char*>(b + kNR * 8 + 16 * h), _MM_HINT_T0);
}

// A tile of at most 16 columns: only the first B vector of each pair is used.
template <int R>
void tile14x16(int64_t pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc,
               int64_t cols, bool accumulate) {
  __m512 acc[R];
#pragma GCC unroll 14
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t p = 0; p < pairs; ++p) {
    prefetchB<1>(b);
    const __m512bh b0 = asBf16(_mm512_loadu_si512(b));
#pragma GCC unroll 14
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_dpbf16_ps(acc[r], asBf16(_mm512_set1_epi32(static_cast<int>(a[r]))), b0);
    a += kMR;
    b += kNR;
  }
  storeTile16<R>(acc, c, ldc, cols, accumulate);
}

template <int R>
void tile14x32(int64_t pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc,
               int64_t cols, bool accumulate) {
  if (cols <= 16) return tile14x16<R>(pairs, a, b, c, ldc, cols, accumulate);
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 14
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t p = 0; p < pairs; ++p) {
    prefetchB<2>(b);
    const __m512bh b0 = asBf16(_mm512_loadu_si512(b));
    const __m512bh b1 = asBf16(_mm512_loadu_si512(b + 16));
#pragma GCC unroll 14
    for (int r = 0; r < R; ++r) {
      const __m512bh av = asBf16(_mm512_set1_epi32(static_cast<int>(a[r])));
      acc0[r] = _mm512_dpbf16_ps(acc0[r], av, b0);
      acc1[r] = _mm512_dpbf16_ps(acc1[r], av, b1);
    }
    a += kMR;
    b += kNR;
  }
  storeTile32<R>(acc0, acc1, c, ldc, cols, accumulate);
}

template <int... R>
void dispatchRows(int64_t rows, std::integer_sequence<int, R...>, int64_t pairs, const uint32_t* a,
                  const uint32_t* b, float* c, int64_t ldc, int64_t cols, bool accumulate) {
  // Calls tile14x32<rows>: one instantiation per row count 1..kMR.
  (void)((rows == R + 1 ? (tile14x32<R + 1>(pairs, a, b, c, ldc, cols, accumulate), true)
                        : false) ||
         ...);
}

void kernel14x32(int64_t pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc,
                 int64_t rows, int64_t cols, bool accumulate) {
  dispatchRows(rows, std::make_integer_sequence<int, kMR>{}, pairs, a, b, c, ldc, cols, accumulate);
}

// GCC 12 warns that the shuffle intrinsics' own `_mm512_undefined_*` pass-through "may be used
// uninitialized" (a GCC 12 false positive); nothing here is.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// 32 floats of one row from `src` (the first `depth` of them, the rest zero) as 16 BF16 pairs.
inline __m512 rowPairs(const float* src, int64_t depth) {
  const __m512 lo = _mm512_maskz_loadu_ps(firstLanes(depth), src);
  const __m512 hi = _mm512_maskz_loadu_ps(firstLanes(depth - 16), src + 16);
  // vcvtne2ps2bf16 puts its second operand in the low 16 BF16: depth d lands in half d of the row.
  return _mm512_castsi512_ps((__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

// A strip of up to 14 rows: 32 depths of 16 rows at a time become 16 rows of 16 pairs,
// transposed into 16 pairs of 16 rows, of which the strip keeps 14 lanes.
void packARows(int64_t rows, const float* src, int64_t lda, int64_t depth, int64_t pairs,
               uint32_t* dst) {
  const __mmask16 stripMask = firstLanes(kMR);
  for (int64_t p0 = 0; p0 < pairs; p0 += 16) {
    const int64_t k0 = 2 * p0;
    const int64_t left = depth - k0;
    __m512 r[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      r[i] = i < rows && left > 0 ? rowPairs(src + i * lda + k0, left) : _mm512_setzero_ps();
    transpose16x16(r);
    const int64_t count = pairs - p0 < 16 ? pairs - p0 : 16;
#pragma GCC unroll 16
    for (int t = 0; t < 16; ++t) {
      if (t < count)
        _mm512_mask_storeu_ps(reinterpret_cast<float*>(dst + (p0 + t) * kMR), stripMask, r[t]);
    }
  }
}

#pragma GCC diagnostic pop

// A strip of up to 32 columns: for each pair, depth rows 2p and 2p + 1 (16 columns at a time)
// rounded together, then their BF16 interleaved column by column.
void packBColumns(int64_t cols, const float* src, int64_t ldb, int64_t depth, int64_t pairs,
                  uint32_t* dst) {
  alignas(64) static constexpr uint16_t kInterleave[32] = {
      0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i interleave = _mm512_load_si512(kInterleave);
  for (int64_t p = 0; p < pairs; ++p) {
    const int64_t k = 2 * p;
    const float* even = src + k * ldb;
#pragma GCC unroll 2
    for (int h = 0; h < kNrVectors; ++h) {
      const __mmask16 m = firstLanes(cols - 16 * h);
      const __m512 lo = k < depth ? _mm512_maskz_loadu_ps(m, even + 16 * h) : _mm512_setzero_ps();
      const __m512 hi =
          k + 1 < depth ? _mm512_maskz_loadu_ps(m, even + ldb + 16 * h) : _mm512_setzero_ps();
      const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
      _mm512_storeu_si512(dst + p * kNR + 16 * h, _mm512_permutexvar_epi16(interleave, both));
    }
  }
}

}  // namespace

const Bf16GemmKernelInfo& bf16GemmKernelAvx512Bf16() {
  static const Bf16GemmKernelInfo info{"bf16_gemm_14x32_avx512bf16", kernel14x32, packARows,
                                       packBColumns};
  return info;
}

}  // namespace kiln::cpu
