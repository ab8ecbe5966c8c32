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

// A tile's columns' terms and scales in registers, loaded once: stores through the byte pointer
// may alias anything, so terms read through `out` were reloaded after every row's store.
struct TileRequant {
  RequantVectors r;
  __m512i addA, addB;  // columns [0, 16) and [16, 32)
  __m512 scaleA, scaleB;
  __mmask32 store;
};

inline TileRequant tileRequant(const QConvNhwcRequant& o) {
  const __mmask16 a = firstLanes(o.cols), b = firstLanes(o.cols - 16);
  TileRequant t;
  t.r = requantVectors(o.lo, o.hi, o.zeroPoint);
  t.addA = _mm512_maskz_loadu_epi32(a, o.add);
  t.addB = _mm512_maskz_loadu_epi32(b, o.add + 16);
  t.scaleA = o.perColumn ? _mm512_maskz_loadu_ps(a, o.scale) : _mm512_set1_ps(o.scale[0]);
  t.scaleB = o.perColumn ? _mm512_maskz_loadu_ps(b, o.scale + 16) : t.scaleA;
  t.store = o.cols >= 32 ? __mmask32(0xffffffffu) : static_cast<__mmask32>((1u << o.cols) - 1);
  return t;
}

// One row's 32 columns, one store (the masked narrowing store is slow on some CPUs).
template <bool Wide>
inline void requantRow(__m512i a, __m512i b, uint8_t* row, const TileRequant& t) {
  if constexpr (!Wide) {
    _mm_mask_storeu_epi8(row, static_cast<__mmask16>(t.store),
                         requantLanes(a, t.addA, t.scaleA, t.r));
    return;
  }
  const __m256i bytes =
      _mm256_inserti128_si256(_mm256_castsi128_si256(requantLanes(a, t.addA, t.scaleA, t.r)),
                              requantLanes(b, t.addB, t.scaleB, t.r), 1);
  _mm256_mask_storeu_epi8(row, t.store, bytes);
}

// Named accumulators, not an array (qgemm_kernel_avx512vnni.cpp says why). Without `out` the
// sums go to `tile`, with it they are requantized into out.y. Narrow (!Wide) tiles, of 16 columns
// or fewer, keep only the first half of each row: the first 64 bytes of each 128-byte group.
#define KILN_QCONV_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
template <int Rows, bool Wide>
void tile8x32(int64_t taps, int64_t cGroups, const uint8_t* const* table, const uint8_t* w,
              int32_t* tile, const QConvNhwcRequant* out) {
#define KILN_ZERO(i) __m512i c##i##a = _mm512_setzero_si512(), c##i##b = c##i##a;
  KILN_QCONV_ROWS(KILN_ZERO)
  for (int64_t t = 0; t < taps; ++t, table += kQConvNhwcRows) {
#define KILN_ROW(i) const uint8_t* x##i = table[Rows > i ? i : 0];
    KILN_QCONV_ROWS(KILN_ROW)
    for (int64_t g = 0; g < cGroups; ++g) {
      const __m512i r0 = _mm512_loadu_si512(w);
      const __m512i r1 = Wide ? _mm512_loadu_si512(w + 64) : r0;
#define KILN_STEP(i)                                                   \
  if constexpr (Rows > i) {                                            \
    const __m512i a = broadcastLane(x##i + 4 * g);                     \
    c##i##a = _mm512_dpbusd_epi32(c##i##a, a, r0);                     \
    if constexpr (Wide) c##i##b = _mm512_dpbusd_epi32(c##i##b, a, r1); \
  }
      KILN_QCONV_ROWS(KILN_STEP)
      w += 4 * kQConvNhwcCols;
    }
  }
#define KILN_STORE(i)                                                                 \
  if constexpr (Rows > i) {                                                           \
    _mm512_storeu_si512(tile + i * kQConvNhwcCols, c##i##a);                          \
    if constexpr (Wide) _mm512_storeu_si512(tile + i * kQConvNhwcCols + 16, c##i##b); \
  }
#define KILN_REQUANT(i) \
  if constexpr (Rows > i) requantRow<Wide>(c##i##a, c##i##b, y + i * ldy, t);
  if (out) {
    const TileRequant t = tileRequant(*out);
    uint8_t* const y = out->y;
    const int64_t ldy = out->ldy;
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

// Rows and width as template arguments, so that a tail tile keeps only its accumulators live.
template <bool Wide>
void dispatchRows(int64_t taps, int64_t cGroups, const uint8_t* const* table, const uint8_t* w,
                  int32_t* tile, int64_t rows, const QConvNhwcRequant* out) {
  switch (rows) {
    case 1:
      return tile8x32<1, Wide>(taps, cGroups, table, w, tile, out);
    case 2:
      return tile8x32<2, Wide>(taps, cGroups, table, w, tile, out);
    case 3:
      return tile8x32<3, Wide>(taps, cGroups, table, w, tile, out);
    case 4:
      return tile8x32<4, Wide>(taps, cGroups, table, w, tile, out);
    case 5:
      return tile8x32<5, Wide>(taps, cGroups, table, w, tile, out);
    case 6:
      return tile8x32<6, Wide>(taps, cGroups, table, w, tile, out);
    case 7:
      return tile8x32<7, Wide>(taps, cGroups, table, w, tile, out);
    default:
      return tile8x32<8, Wide>(taps, cGroups, table, w, tile, out);
  }
}

void dispatchTile(int64_t taps, int64_t cGroups, const uint8_t* const* table, const uint8_t* w,
                  int32_t* tile, int64_t rows, int64_t cols, const QConvNhwcRequant* out) {
  if (cols > kQConvNhwcCols / 2)
    return dispatchRows<true>(taps, cGroups, table, w, tile, rows, out);
  dispatchRows<false>(taps, cGroups, table, w, tile, rows, out);
}

}  // namespace

void qconvNhwcTileAvx512Vnni(int64_t taps, int64_t cGroups, const uint8_t* const* table,
                             const uint8_t* weights, int32_t* tile, int64_t rows, int64_t cols) {
  dispatchTile(taps, cGroups, table, weights, tile, rows, cols, nullptr);
}

void qconvNhwcTileRequantAvx512Vnni(int64_t taps, int64_t cGroups, const uint8_t* const* table,
                                    const uint8_t* weights, int64_t rows,
                                    const QConvNhwcRequant& out) {
  dispatchTile(taps, cGroups, table, weights, nullptr, rows, out.cols, &out);
}

}  // namespace kiln::cpu
