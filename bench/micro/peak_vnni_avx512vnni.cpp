#include <immintrin.h>

#include "peak_vnni.h"

namespace kiln::bench {

int32_t vnniChainsAvx512(int64_t iterations) {
  __m512i acc[kVnniChains];
  for (int i = 0; i < kVnniChains; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-1);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < kVnniChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], u, s);
  }
  __m512i sum = acc[0];
  for (int i = 1; i < kVnniChains; ++i) sum = _mm512_add_epi32(sum, acc[i]);
  return _mm512_reduce_add_epi32(sum);
}

}  // namespace kiln::bench
