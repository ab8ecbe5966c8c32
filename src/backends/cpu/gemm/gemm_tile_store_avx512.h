// How the AVX-512 GEMM micro-kernels (sgemm_kernel_avx512.cpp, bf16_gemm_kernel_avx512bf16.cpp)
// leave their register tile: R rows of 16 or 32 columns of C, only the first `cols` of them,
// added to C's values when accumulating. Include only from AVX-512 files (*_avx512*.cpp): it is in
// an unnamed namespace, so each such file compiles its own copy with its own flags.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace kiln::cpu {
namespace {

// The first n of 16 lanes (none for n <= 0).
inline __mmask16 firstLanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

template <int R>
inline void storeTile16(const __m512 (&acc)[R], float* c, int64_t ldc, int64_t cols,
                        bool accumulate) {
  const __mmask16 m0 = firstLanes(cols);
#pragma GCC unroll 14
  for (int r = 0; r < R; ++r) {
    float* row = c + r * ldc;
    __m512 v = acc[r];
    if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m0, row));
    _mm512_mask_storeu_ps(row, m0, v);
  }
}

// Columns 0-15 in acc0, 16-31 in acc1.
template <int R>
inline void storeTile32(const __m512 (&acc0)[R], const __m512 (&acc1)[R], float* c, int64_t ldc,
                        int64_t cols, bool accumulate) {
  const __mmask16 m0 = firstLanes(cols), m1 = firstLanes(cols - 16);
#pragma GCC unroll 14
  for (int r = 0; r < R; ++r) {
    float* row = c + r * ldc;
    __m512 lo = acc0[r], hi = acc1[r];
    if (accumulate) {
      lo = _mm512_add_ps(lo, _mm512_maskz_loadu_ps(m0, row));
      hi = _mm512_add_ps(hi, _mm512_maskz_loadu_ps(m1, row + 16));
    }
    _mm512_mask_storeu_ps(row, m0, lo);
    _mm512_mask_storeu_ps(row + 16, m1, hi);
  }
}

}  // namespace
}  // namespace kiln::cpu
