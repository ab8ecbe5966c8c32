// f32_gemm_6x16_fma3: 6 rows x 16 columns of C in 12 ymm accumulators, two B vectors and one
// broadcast A value per row and k. Row tails compile to a kernel with fewer rows (no wasted
// FMAs); column tails store through a mask.
#include <immintrin.h>

#include "backends/cpu/gemm/sgemm_kernels.h"

namespace kiln::cpu {
namespace {

constexpr int kMR = 6;
constexpr int kNR = 16;

inline __m256i laneMask(int64_t valid) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid)), iota);
}

// Stores (or adds into C, when accumulate) one row of the tile; a column tail goes through masks.
inline void storeRow(float* row, __m256 lo, __m256 hi, int64_t cols, bool accumulate) {
  if (cols == kNR) {
    if (accumulate) {
      lo = _mm256_add_ps(lo, _mm256_loadu_ps(row));
      hi = _mm256_add_ps(hi, _mm256_loadu_ps(row + 8));
    }
    _mm256_storeu_ps(row, lo);
    _mm256_storeu_ps(row + 8, hi);
    return;
  }
  const __m256i m0 = laneMask(cols), m1 = laneMask(cols - 8);
  if (accumulate) {
    lo = _mm256_add_ps(lo, _mm256_maskload_ps(row, m0));
    hi = _mm256_add_ps(hi, _mm256_maskload_ps(row + 8, m1));
  }
  _mm256_maskstore_ps(row, m0, lo);
  _mm256_maskstore_ps(row + 8, m1, hi);
}

// Named accumulators rather than arrays: with only 16 ymm registers GCC spills arrays.
template <int R>
void tile6x16(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t cols,
              bool accumulate) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b);
    const __m256 b1 = _mm256_loadu_ps(b + 8);
    __m256 av = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(av, b0, c00);
    c01 = _mm256_fmadd_ps(av, b1, c01);
    if constexpr (R > 1) {
      av = _mm256_broadcast_ss(a + 1);
      c10 = _mm256_fmadd_ps(av, b0, c10);
      c11 = _mm256_fmadd_ps(av, b1, c11);
    }
    if constexpr (R > 2) {
      av = _mm256_broadcast_ss(a + 2);
      c20 = _mm256_fmadd_ps(av, b0, c20);
      c21 = _mm256_fmadd_ps(av, b1, c21);
    }
    if constexpr (R > 3) {
      av = _mm256_broadcast_ss(a + 3);
      c30 = _mm256_fmadd_ps(av, b0, c30);
      c31 = _mm256_fmadd_ps(av, b1, c31);
    }
    if constexpr (R > 4) {
      av = _mm256_broadcast_ss(a + 4);
      c40 = _mm256_fmadd_ps(av, b0, c40);
      c41 = _mm256_fmadd_ps(av, b1, c41);
    }
    if constexpr (R > 5) {
      av = _mm256_broadcast_ss(a + 5);
      c50 = _mm256_fmadd_ps(av, b0, c50);
      c51 = _mm256_fmadd_ps(av, b1, c51);
    }
    a += kMR;
    b += kNR;
  }
  storeRow(c, c00, c01, cols, accumulate);
  if constexpr (R > 1) storeRow(c + ldc, c10, c11, cols, accumulate);
  if constexpr (R > 2) storeRow(c + 2 * ldc, c20, c21, cols, accumulate);
  if constexpr (R > 3) storeRow(c + 3 * ldc, c30, c31, cols, accumulate);
  if constexpr (R > 4) storeRow(c + 4 * ldc, c40, c41, cols, accumulate);
  if constexpr (R > 5) storeRow(c + 5 * ldc, c50, c51, cols, accumulate);
}

void kernel6x16(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t rows,
                int64_t cols, bool accumulate) {
  switch (rows) {
    case 6:
      return tile6x16<6>(kc, a, b, c, ldc, cols, accumulate);
    case 5:
      return tile6x16<5>(kc, a, b, c, ldc, cols, accumulate);
    case 4:
      return tile6x16<4>(kc, a, b, c, ldc, cols, accumulate);
    case 3:
      return tile6x16<3>(kc, a, b, c, ldc, cols, accumulate);
    case 2:
      return tile6x16<2>(kc, a, b, c, ldc, cols, accumulate);
    default:
      return tile6x16<1>(kc, a, b, c, ldc, cols, accumulate);
  }
}

}  // namespace

const SgemmKernelInfo& sgemmKernelAvx2() {
  // A 16 x 256 B strip (16 KiB) stays in L1 while 6-row A strips stream from a 144 x 256 block
  // (144 KiB, in the 512 KiB L2 of the AVX2-only CPUs this path is for, Zen 1).
  static const SgemmKernelInfo info{
      CpuIsa::kAvx2, "f32_gemm_6x16_fma3", kMR, kNR, 256, 144, 2048, false, kernel6x16, nullptr};
  return info;
}

const SgemmKernelInfo& sgemmKernelFor(CpuIsa isa) {
  return isa == CpuIsa::kAvx512 && detectedCpuIsa() == CpuIsa::kAvx512 ? sgemmKernelAvx512()
                                                                       : sgemmKernelAvx2();
}

}  // namespace kiln::cpu
