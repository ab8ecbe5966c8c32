// pool_max_bytes.h's MaxPool over byte planes with AVX-512BW byte maxima.
#include <immintrin.h>

#include "backends/cpu/kernels/pool_max_bytes.h"

namespace kiln::cpu {
namespace {

inline __mmask64 bytes(int64_t n) { return n >= 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1; }
inline __mmask32 words(int64_t n) { return n >= 32 ? ~__mmask32(0) : (__mmask32(1) << n) - 1; }

// merged[i] = max over the rows of (row[i] ^ flip), for i < n.
void mergeRows(const uint8_t* plane, const int64_t* rows, int64_t count, int64_t n, __m512i flip,
               uint8_t* merged) {
  for (int64_t i = 0; i < n; i += 64) {
    const __mmask64 m = bytes(n - i);
    __m512i v = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, plane + rows[0] * n + i), flip);
    for (int64_t r = 1; r < count; ++r) {
      v = _mm512_max_epu8(
          v, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, plane + rows[r] * n + i), flip));
    }
    _mm512_mask_storeu_epi8(merged + i, m, v);
  }
}

// out[o] = max over taps c of padded[o * stride + c * dilation] ^ flip, for o < n.
void poolColumns(const BytePoolRows& g, const uint8_t* padded, __m512i flip, uint8_t* out) {
  const int64_t n = g.out2, k = g.kernel, d = g.dilation;
  if (g.stride == 1) {
    for (int64_t o = 0; o < n; o += 64) {
      __m512i v = _mm512_loadu_si512(padded + o);
      for (int64_t c = 1; c < k; ++c)
        v = _mm512_max_epu8(v, _mm512_loadu_si512(padded + o + c * d));
      _mm512_mask_storeu_epi8(out + o, bytes(n - o), _mm512_xor_si512(v, flip));
    }
  } else if (g.stride == 2) {
    // A 16-bit lane of the load at padded + 2o + c*d holds tap c of output o in its low byte.
    const __m512i low = _mm512_set1_epi16(0x00ff);
    for (int64_t o = 0; o < n; o += 32) {
      __m512i v = _mm512_loadu_si512(padded + 2 * o);
      for (int64_t c = 1; c < k; ++c)
        v = _mm512_max_epu8(v, _mm512_loadu_si512(padded + 2 * o + c * d));
      const __m512i taps = _mm512_and_si512(_mm512_xor_si512(v, flip), low);
      _mm512_mask_cvtepi16_storeu_epi8(out + o, words(n - o), taps);
    }
  } else {
    const uint8_t f = g.isSigned ? 0x80 : 0;
    for (int64_t o = 0; o < n; ++o) {
      const uint8_t* p = padded + o * g.stride;
      uint8_t v = p[0];
      for (int64_t c = 1; c < k; ++c) v = p[c * d] > v ? p[c * d] : v;
      out[o] = static_cast<uint8_t>(v ^ f);
    }
  }
}

}  // namespace

void maxPoolBytesAvx512(const BytePoolRows& g, const uint8_t* x, uint8_t* y, int64_t pBegin,
                        int64_t pEnd, uint8_t* buffer) {
  const __m512i flip = _mm512_set1_epi8(g.isSigned ? static_cast<char>(0x80) : 0);
  const int64_t length = g.bufferLength();
  // The padding (and what lies past the row) holds 0: the lowest value in the flipped order.
  for (int64_t i = 0; i < length; i += 64)
    _mm512_mask_storeu_epi8(buffer + i, bytes(length - i), _mm512_setzero_si512());
  uint8_t* row = buffer + g.padBegin;
  for (int64_t p = pBegin; p < pEnd; ++p) {
    const uint8_t* plane = x + p * g.inPlane;
    uint8_t* dst = y + p * g.outPlane;
    for (int64_t r = 0; r < g.outRows; ++r, dst += g.out2) {
      const int64_t count = g.rowBegin[r + 1] - g.rowBegin[r];
      if (count == 0) {  // a window entirely in padding: 0, as the generic kernel gives
        for (int64_t o = 0; o < g.out2; o += 64)
          _mm512_mask_storeu_epi8(dst + o, bytes(g.out2 - o), _mm512_setzero_si512());
        continue;
      }
      // Rows flipped into the buffer, columns flipped back on the way out.
      mergeRows(plane, g.rowList + g.rowBegin[r], count, g.in2, flip, row);
      poolColumns(g, buffer, flip, dst);
    }
  }
}

}  // namespace kiln::cpu
