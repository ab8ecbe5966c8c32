#include <immintrin.h>

#include "backends/cpu/kernels/qlinear_pool_sums.h"

namespace kiln::cpu {

void sumDequantizedChannelsAvx512(const uint8_t* x, bool isSigned, int64_t pixels, int64_t stride,
                                  int64_t channels, double scale, double zeroPoint, double* sums) {
  const __m512d s = _mm512_set1_pd(scale), z = _mm512_set1_pd(zeroPoint);
  // float((q - zp) * scale) for eight int32 q: the product is exact in double, one rounding.
  const auto dequantized = [&](__m256i q) {
    const __m512d v = _mm512_mul_pd(_mm512_sub_pd(_mm512_cvtepi32_pd(q), z), s);
    return _mm512_cvtps_pd(_mm512_cvtpd_ps(v));
  };
  for (int64_t c = 0; c < channels; c += 16) {
    const int64_t left = channels - c;
    const __mmask16 m = left >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1);
    __m512d low = _mm512_setzero_pd(), high = low;
    const uint8_t* at = x + c;
    for (int64_t p = 0; p < pixels; ++p, at += stride) {
      const __m128i bytes = _mm_maskz_loadu_epi8(m, at);
      const __m512i q = isSigned ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
      low = _mm512_add_pd(low, dequantized(_mm512_castsi512_si256(q)));
      high = _mm512_add_pd(high, dequantized(_mm512_extracti64x4_epi64(q, 1)));
    }
    // Lanes past the last channel summed (0 - zp) * scale: they are not stored.
    _mm512_mask_storeu_pd(sums + c, static_cast<__mmask8>(m), low);
    _mm512_mask_storeu_pd(sums + c + 8, static_cast<__mmask8>(m >> 8), high);
  }
}

}  // namespace kiln::cpu
