// qconvNhwcTileAvx512Vnni: 8 pixels x 32 output channels in 16 accumulators, as the GEMM's
// u8s8_gemm_8x32 kernel, but each pixel's 4 bytes are broadcast from its own address in the
// image (the indirection table, one address per pixel and tap) instead of a packed strip.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/qgemm/qconv_nhwc_kernel.h"
#include "backends/cpu/qgemm/requant_avx512.h"

namespace kiln::cpu {
namespace {

inline __m512i broadcastLane(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm512_set1_epi32(v);
}

// Columns [j, j + 16) of one row requantized, as bytes.
inline __m128i requant16(__m512i acc, int64_t j, const QConvNhwcRequant& o,
                         const RequantVectors& r) {
  const __mmask16 m = firstLanes(o.cols - j);
  const __m512 s = o.perColumn ? _mm512_maskz_loadu_ps(m, o.scale + j) : _mm512_set1_ps(o.scale[0]);
  return requantLanes(acc, _mm512_maskz_loadu_epi32(m, o.add + j), s, r);
}

// One row's 32 columns, one store (the masked narrowing store is slow on some CPUs).
inline void requantRow(__m512i a, __m512i b, uint8_t* row, const QConvNhwcRequant& o,
                       const RequantVectors& r) {
  const __m256i bytes = _mm256_inserti128_si256(_mm256_castsi128_si256(requant16(a, 0, o, r)),
                                                requant16(b, 16, o, r), 1);
  const __mmask32 m =
      o.cols >= 32 ? __mmask32(0xffffffffu) : static_cast<__mmask32>((1u << o.cols) - 1);
  _mm256_mask_storeu_epi8(row, m, bytes);
}

// Named accumulators, not an array (qgemm_kernel_avx512vnni.cpp says why). Without `out` the
// sums go to `tile`, with it they are requantized into out.y.
#define KILN_QCONV_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
template <int Rows>
void tile8x32(int64_t taps, int64_t cGroups, const uint8_t* const* table, const uint8_t* w,
              int32_t* tile, const QConvNhwcRequant* out) {
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
#define KILN_REQUANT(i) \
  if constexpr (Rows > i) requantRow(c##i##a, c##i##b, out->y + i * out->ldy, *out, r);
  if (out) {
    const RequantVectors r = requantVectors(out->lo, out->hi, out->zeroPoint);
    KILN_QCONV_ROWS(KILN_REQUANT)
    return;
  }
  KILN_QCONV_ROWS(KILN_STORE)
#undef KILN_ZERO
#undef KILN_ROW
#undef KILN_STEP
#undef KILN_STORE
#undef KILN_REQUANT
}
#undef KILN_QCONV_ROWS

// Rows as a template argument, so that a tail tile keeps only its accumulators live.
void dispatchRows(int64_t taps, int64_t cGroups, const uint8_t* const* table, const uint8_t* w,
                  int32_t* tile, int64_t rows, const QConvNhwcRequant* out) {
  switch (rows) {
    case 1:
      return tile8x32<1>(taps, cGroups, table, w, tile, out);
    case 2:
      return tile8x32<2>(taps, cGroups, table, w, tile, out);
    case 3:
      return tile8x32<3>(taps, cGroups, table, w, tile, out);
    case 4:
      return tile8x32<4>(taps, cGroups, table, w, tile, out);
    case 5:
      return tile8x32<5>(taps, cGroups, table, w, tile, out);
    case 6:
      return tile8x32<6>(taps, cGroups, table, w, tile, out);
    case 7:
      return tile8x32<7>(taps, cGroups, table, w, tile, out);
    default:
      return tile8x32<8>(taps, cGroups, table, w, tile, out);
  }
}

}  // namespace

void qconvNhwcTileAvx512Vnni(int64_t taps, int64_t cGroups, const uint8_t* const* table,
                             const uint8_t* weights, int32_t* tile, int64_t rows) {
  dispatchRows(taps, cGroups, table, weights, tile, rows, nullptr);
}

void qconvNhwcTileRequantAvx512Vnni(int64_t taps, int64_t cGroups, const uint8_t* const* table,
                                    const uint8_t* weights, int64_t rows,
                                    const QConvNhwcRequant& out) {
  dispatchRows(taps, cGroups, table, weights, nullptr, rows, &out);
}

}  // namespace kiln::cpu
