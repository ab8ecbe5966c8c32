// u8s8_gemm_8x32_avx512vnni: 8 rows x 32 columns (two zmm of 16 int32) in 16 accumulators, one
// vpdpbusd per row and vector for each group of 4 k. The left operand's 4 bytes of a row are
// broadcast to every lane; the right operand's strip is loaded as two vectors.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/qgemm/qgemm_kernels.h"

namespace kiln::cpu {
namespace {

constexpr int kMr = 8, kNr = 32;

inline __m512i broadcastLane(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm512_set1_epi32(v);
}

template <bool LeftUnsigned>
inline __m512i dot4(__m512i acc, __m512i l, __m512i r) {
  return LeftUnsigned ? _mm512_dpbusd_epi32(acc, l, r) : _mm512_dpbusd_epi32(acc, r, l);
}

// The accumulators are named variables, not an array: GCC keeps an array's zmm values moving
// between registers on every step (a vmovdqa per vpdpbusd), which halves the kernel's speed.
#define KILN_QGEMM_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
template <int Rows, bool LeftUnsigned>
void tile8x32(int64_t kGroups, const uint8_t* left, const uint8_t* right, int32_t* tile) {
#define KILN_ZERO(i) __m512i c##i##a = _mm512_setzero_si512(), c##i##b = c##i##a;
  KILN_QGEMM_ROWS(KILN_ZERO)
  for (int64_t g = 0; g < kGroups; ++g) {
    const __m512i r0 = _mm512_loadu_si512(right);
    const __m512i r1 = _mm512_loadu_si512(right + 64);
#define KILN_STEP(i)                               \
  if constexpr (Rows > i) {                        \
    const __m512i l = broadcastLane(left + 4 * i); \
    c##i##a = dot4<LeftUnsigned>(c##i##a, l, r0);  \
    c##i##b = dot4<LeftUnsigned>(c##i##b, l, r1);  \
  }
    KILN_QGEMM_ROWS(KILN_STEP)
    left += 4 * kMr;
    right += 4 * kNr;
  }
#define KILN_STORE(i)                                  \
  if constexpr (Rows > i) {                            \
    _mm512_storeu_si512(tile + i * kNr, c##i##a);      \
    _mm512_storeu_si512(tile + i * kNr + 16, c##i##b); \
  }
  KILN_QGEMM_ROWS(KILN_STORE)
#undef KILN_ZERO
#undef KILN_STEP
#undef KILN_STORE
}
#undef KILN_QGEMM_ROWS

template <bool LeftUnsigned>
void dispatchRows(int64_t kGroups, const uint8_t* left, const uint8_t* right, int32_t* tile,
                  int64_t rows) {
  switch (rows) {
    case 1:
      return tile8x32<1, LeftUnsigned>(kGroups, left, right, tile);
    case 2:
      return tile8x32<2, LeftUnsigned>(kGroups, left, right, tile);
    case 3:
      return tile8x32<3, LeftUnsigned>(kGroups, left, right, tile);
    case 4:
      return tile8x32<4, LeftUnsigned>(kGroups, left, right, tile);
    case 5:
      return tile8x32<5, LeftUnsigned>(kGroups, left, right, tile);
    case 6:
      return tile8x32<6, LeftUnsigned>(kGroups, left, right, tile);
    case 7:
      return tile8x32<7, LeftUnsigned>(kGroups, left, right, tile);
    default:
      return tile8x32<8, LeftUnsigned>(kGroups, left, right, tile);
  }
}

void kernel8x32(int64_t kGroups, const uint8_t* left, const uint8_t* right, int32_t* tile,
                int64_t rows, bool leftUnsigned) {
  if (leftUnsigned) return dispatchRows<true>(kGroups, left, right, tile, rows);
  dispatchRows<false>(kGroups, left, right, tile, rows);
}

}  // namespace

const QGemmKernelInfo& qgemmKernelAvx512Vnni() {
  static const QGemmKernelInfo info{
      CpuIsa::kAvx512Vnni, "u8s8_gemm_8x32_avx512vnni", kMr, kNr, kernel8x32, nullptr,
      finishQTileAvx512};
  return info;
}

}  // namespace kiln::cpu
