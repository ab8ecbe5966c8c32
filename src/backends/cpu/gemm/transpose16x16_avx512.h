// The 16 x 16 transpose of 32-bit lanes that the AVX-512 GEMM packers use (sgemm_kernel_avx512.cpp,
// bf16_gemm_kernel_avx512bf16.cpp). Include only from AVX-512 files (*_avx512*.cpp): it is in an
// unnamed namespace, so each such file compiles its own copy with its own flags and no AVX-512
// code is shared with the baseline build.
#pragma once
#include <immintrin.h>

namespace kiln::cpu {
namespace {

// GCC 12 warns that the shuffle intrinsics' own `_mm512_undefined_*` pass-through "may be used
// uninitialized" (a GCC 12 false positive); nothing here is.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// Transposes the 16x16 block in r[0..15] (row i in r[i]) in place: 4 rounds of 16 shuffles.
inline void transpose16x16(__m512 r[16]) {
  __m512 t[16], u[16];
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) {
    const __m512d t0 = _mm512_castps_pd(t[i]), t1 = _mm512_castps_pd(t[i + 1]);
    const __m512d t2 = _mm512_castps_pd(t[i + 2]), t3 = _mm512_castps_pd(t[i + 3]);
    u[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    u[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    u[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    u[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  // 128-bit lane L of u[4g + c] is column 4L + c of rows 4g..4g+3; gather the lanes per column.
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88),
                 v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
    const __m512 w0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
    const __m512 w1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
    r[c] = _mm512_shuffle_f32x4(v0, w0, 0x88);
    r[c + 8] = _mm512_shuffle_f32x4(v0, w0, 0xDD);
    r[c + 4] = _mm512_shuffle_f32x4(v1, w1, 0x88);
    r[c + 12] = _mm512_shuffle_f32x4(v1, w1, 0xDD);
  }
}

#pragma GCC diagnostic pop

}  // namespace
}  // namespace kiln::cpu
