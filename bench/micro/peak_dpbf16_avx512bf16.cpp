#include <immintrin.h>

#include "peak_fma.h"

namespace kiln::bench {

float dpbf16ChainsAvx512(int64_t iterations) {
  __m512 acc[kFmaChains];
  for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  // Pairs of BF16 1.0 and 2^-20: the sums stay normal and finite.
  const __m512bh m = (__m512bh)_mm512_set1_epi32(0x3f803f80),
                 a = (__m512bh)_mm512_set1_epi32(0x35803580);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], m, a);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < kFmaChains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  return _mm512_reduce_add_ps(sum);
}

}  // namespace kiln::bench
