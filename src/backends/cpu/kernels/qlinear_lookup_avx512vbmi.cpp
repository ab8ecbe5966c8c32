#include <immintrin.h>

#include "backends/cpu/kernels/qlinear_lookup.h"

namespace kiln::cpu {

// The table as four 64-byte quarters: vpermi2b picks from two quarters by the low 7 bits, the
// top bit picks between the two picks.
void lookupBytesAvx512Vbmi(const uint8_t* table, const uint8_t* x, int64_t n, uint8_t* y) {
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64),
                t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  for (int64_t i = 0; i < n; i += 64) {
    const __mmask64 m = n - i >= 64 ? ~__mmask64(0) : (__mmask64(1) << (n - i)) - 1;
    const __m512i v = _mm512_maskz_loadu_epi8(m, x + i);
    const __m512i low = _mm512_permutex2var_epi8(t0, v, t1);
    const __m512i high = _mm512_permutex2var_epi8(t2, v, t3);
    _mm512_mask_storeu_epi8(y + i, m, _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), low, high));
  }
}

}  // namespace kiln::cpu
