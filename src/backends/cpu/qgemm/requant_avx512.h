// Sixteen int32 sums requantized to 8-bit values in registers, with finishQTileAvx512's arithmetic
// for a tile whose only term is one per channel: y = round_half_even(clamp(float(v + add) * scale,
// lo, hi)) + zeroPoint, the bounds already minus the zero point (equal to clamping after the
// rounding, as the bounds are integers). Inline AVX-512 code: include it only from *_avx512vnni.cpp
// files (CMakeLists.txt says why).
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace kiln::cpu {

/// The first n of sixteen lanes.
inline __mmask16 firstLanes(int64_t n) {
  return n >= 16  ? __mmask16(0xffff)
         : n <= 0 ? __mmask16(0)
                  : static_cast<__mmask16>((1u << n) - 1);
}

/// The output's requantization, broadcast once per call of a micro-kernel.
struct RequantVectors {
  __m512 lo, hi;
  __m512i zeroPoint;
};

inline RequantVectors requantVectors(float lo, float hi, int32_t zeroPoint) {
  return {_mm512_set1_ps(lo), _mm512_set1_ps(hi), _mm512_set1_epi32(zeroPoint)};
}

/// Sixteen sums and their channels' terms and scales, requantized: one byte a lane.
inline __m128i requantLanes(__m512i sums, __m512i add, __m512 scale, const RequantVectors& r) {
  const __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(sums, add)), scale);
  const __m512 clamped = _mm512_min_ps(_mm512_max_ps(f, r.lo), r.hi);
  return _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(clamped), r.zeroPoint));
}

}  // namespace kiln::cpu
