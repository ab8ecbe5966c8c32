// kiln::NchwcGlobalAveragePool's per-plane mean on AVX-512 (dispatched from nchwc_pool.cpp): the
// same sums as its AVX2 code (each lane in double, even and odd pixels apart, added at the end),
// so both give identical results, on 8-double vectors: one pixel is two conversions and two adds.
#include <immintrin.h>

#include <cstdint>

namespace kiln::cpu::detail {
namespace {

// 8 floats to 8 doubles and back; the all-lanes maskz forms because GCC 12 warns falsely about the
// _mm512_undefined_* in the plain _mm512_cvtps_pd / _mm512_cvtpd_ps.
inline __m512d widen(__m256 v) { return _mm512_maskz_cvtps_pd(__mmask8(0xFF), v); }
inline __m256 narrow(__m512d v) { return _mm512_maskz_cvtpd_ps(__mmask8(0xFF), v); }

}  // namespace

void averageBlockedPlaneAvx512(const float* src, int64_t pixels, float* dst) {
  __m512d evenLo = _mm512_setzero_pd(), evenHi = _mm512_setzero_pd();
  __m512d oddLo = _mm512_setzero_pd(), oddHi = _mm512_setzero_pd();
  int64_t p = 0;
  for (; p + 2 <= pixels; p += 2) {
    const float* q = src + p * 16;
    evenLo = _mm512_add_pd(evenLo, widen(_mm256_loadu_ps(q)));
    evenHi = _mm512_add_pd(evenHi, widen(_mm256_loadu_ps(q + 8)));
    oddLo = _mm512_add_pd(oddLo, widen(_mm256_loadu_ps(q + 16)));
    oddHi = _mm512_add_pd(oddHi, widen(_mm256_loadu_ps(q + 24)));
  }
  if (p < pixels) {
    evenLo = _mm512_add_pd(evenLo, widen(_mm256_loadu_ps(src + p * 16)));
    evenHi = _mm512_add_pd(evenHi, widen(_mm256_loadu_ps(src + p * 16 + 8)));
  }
  const __m512d count = _mm512_set1_pd(static_cast<double>(pixels));
  _mm256_storeu_ps(dst, narrow(_mm512_div_pd(_mm512_add_pd(evenLo, oddLo), count)));
  _mm256_storeu_ps(dst + 8, narrow(_mm512_div_pd(_mm512_add_pd(evenHi, oddHi), count)));
}

}  // namespace kiln::cpu::detail
