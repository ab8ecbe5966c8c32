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

template <int Rows, bool LeftUnsigned>
void tile8x32(int64_t kGroups, const uint8_t* left, const uint8_t* right, int32_t* tile) {
  __m512i acc[Rows][2];
  for (int i = 0; i < Rows; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_si512();
  for (int64_t g = 0; g < kGroups; ++g) {
    const __m512i r0 = _mm512_loadu_si512(right);
    const __m512i r1 = _mm512_loadu_si512(right + 64);
    for (int i = 0; i < Rows; ++i) {
      const __m512i l = broadcastLane(left + 4 * i);
      if constexpr (LeftUnsigned) {
        acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], l, r0);
        acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], l, r1);
      } else {
        acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], r0, l);
        acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], r1, l);
      }
    }
    left += 4 * kMr;
    right += 4 * kNr;
  }
  for (int i = 0; i < Rows; ++i) {
    _mm512_storeu_si512(tile + i * kNr, acc[i][0]);
    _mm512_storeu_si512(tile + i * kNr + 16, acc[i][1]);
  }
}

template <bool LeftUnsigned>
void dispatchRows(int64_t kGroups, const uint8_t* left, const uint8_t* right, int32_t* tile, int64_t rows) {
  switch (rows) {
    case 1: return tile8x32<1, LeftUnsigned>(kGroups, left, right, tile);
    case 2: return tile8x32<2, LeftUnsigned>(kGroups, left, right, tile);
    case 3: return tile8x32<3, LeftUnsigned>(kGroups, left, right, tile);
    case 4: return tile8x32<4, LeftUnsigned>(kGroups, left, right, tile);
    case 5: return tile8x32<5, LeftUnsigned>(kGroups, left, right, tile);
    case 6: return tile8x32<6, LeftUnsigned>(kGroups, left, right, tile);
    case 7: return tile8x32<7, LeftUnsigned>(kGroups, left, right, tile);
    default: return tile8x32<8, LeftUnsigned>(kGroups, left, right, tile);
  }
}

void kernel8x32(int64_t kGroups, const uint8_t* left, const uint8_t* right, int32_t* tile, int64_t rows,
                bool leftUnsigned) {
  if (leftUnsigned) return dispatchRows<true>(kGroups, left, right, tile, rows);
  dispatchRows<false>(kGroups, left, right, tile, rows);
}

}  // namespace

const QGemmKernelInfo& qgemmKernelAvx512Vnni() {
  static const QGemmKernelInfo info{CpuIsa::kAvx512Vnni, "u8s8_gemm_8x32_avx512vnni", kMr, kNr, kernel8x32, nullptr,
                                    finishQTileAvx512};
  return info;
}

}  // namespace kiln::cpu
