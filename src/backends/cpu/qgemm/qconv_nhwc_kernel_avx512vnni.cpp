// qconvNhwcTileAvx512Vnni: 8 pixels x 32 output channels in 16 accumulators, as the GEMM's
// u8s8_gemm_8x32 kernel, but each pixel's 4 bytes are broadcast from its own address in the
// image (the indirection table, one address per pixel and tap) instead of a packed strip.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/qgemm/qconv_nhwc_kernel.h"

namespace kiln::cpu {
namespace {

inline __m512i broadcastLane(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm512_set1_epi32(v);
}

// Named accumulators, not an array (qgemm_kernel_avx512vnni.cpp says why).
#define KILN_QCONV_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
template <int Rows>
void tile8x32(int64_t taps, int64_t cGroups, const uint8_t* const* table, const uint8_t* w,
              int32_t* tile) {
#define KILN_ZERO(i) __m512i c##i##a = _mm512_setzero_si512(), c##i##b = c##i##a;
  KILN_QCONV_ROWS(KILN_ZERO)
  for (int64_t t = 0; t < taps; ++t, table += kQConvNhwcRows) {
#define KILN_ROW(i) const uint8_t* x##i = table[Rows > i ? i : 0];
    KILN_QCONV_ROWS(KILN_ROW)
    for (int64_t g = 0; g < cGroups; ++g) {
      const __m512i r0 = _mm512_loadu_si512(w);
      const __m512i r1 = _mm512_loadu_si512(w + 64);
#define KILN_STEP(i)                               \
  if constexpr (Rows > i) {                        \
    const __m512i a = broadcastLane(x##i + 4 * g); \
    c##i##a = _mm512_dpbusd_epi32(c##i##a, a, r0); \
    c##i##b = _mm512_dpbusd_epi32(c##i##b, a, r1); \
  }
      KILN_QCONV_ROWS(KILN_STEP)
      w += 4 * kQConvNhwcCols;
    }
  }
#define KILN_STORE(i)                                             \
  if constexpr (Rows > i) {                                       \
    _mm512_storeu_si512(tile + i * kQConvNhwcCols, c##i##a);      \
    _mm512_storeu_si512(tile + i * kQConvNhwcCols + 16, c##i##b); \
  }
  KILN_QCONV_ROWS(KILN_STORE)
#undef KILN_ZERO
#undef KILN_ROW
#undef KILN_STEP
#undef KILN_STORE
}
#undef KILN_QCONV_ROWS

}  // namespace

void qconvNhwcTileAvx512Vnni(int64_t taps, int64_t cGroups, const uint8_t* const* table,
                             const uint8_t* weights, int32_t* tile, int64_t rows) {
  switch (rows) {
    case 1:
      return tile8x32<1>(taps, cGroups, table, weights, tile);
    case 2:
      return tile8x32<2>(taps, cGroups, table, weights, tile);
    case 3:
      return tile8x32<3>(taps, cGroups, table, weights, tile);
    case 4:
      return tile8x32<4>(taps, cGroups, table, weights, tile);
    case 5:
      return tile8x32<5>(taps, cGroups, table, weights, tile);
    case 6:
      return tile8x32<6>(taps, cGroups, table, weights, tile);
    case 7:
      return tile8x32<7>(taps, cGroups, table, weights, tile);
    default:
      return tile8x32<8>(taps, cGroups, table, weights, tile);
  }
}

}  // namespace kiln::cpu
