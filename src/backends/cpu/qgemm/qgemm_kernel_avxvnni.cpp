// u8s8_gemm_6x16_avxvnni: the VEX-encoded vpdpbusd on ymm (AVX-VNNI, an AVX2 extension): 6 rows
// x 16 columns (two ymm of 8 int32) in 12 of the 16 registers, one vpdpbusd per row and vector
// for each group of 4 k.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/qgemm/qgemm_kernels.h"

namespace kiln::cpu {
namespace {

constexpr int kMr = 6, kNr = 16;

inline __m256i broadcastLane(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

template <bool LeftUnsigned>
inline __m256i dot4(__m256i acc, __m256i l, __m256i r) {
  return LeftUnsigned ? _mm256_dpbusd_avx_epi32(acc, l, r) : _mm256_dpbusd_avx_epi32(acc, r, l);
}

// Named accumulators, not an array (qgemm_kernel_avx512vnni.cpp says why).
#define KILN_QGEMM_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
template <int Rows, bool LeftUnsigned>
void tile6x16(int64_t kGroups, const uint8_t* left, const uint8_t* right, int32_t* tile) {
#define KILN_ZERO(i) __m256i c##i##a = _mm256_setzero_si256(), c##i##b = c##i##a;
  KILN_QGEMM_ROWS(KILN_ZERO)
  for (int64_t g = 0; g < kGroups; ++g) {
    const __m256i r0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(right));
    const __m256i r1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(right + 32));
#define KILN_STEP(i)                               \
  if constexpr (Rows > i) {                        \
    const __m256i l = broadcastLane(left + 4 * i); \
    c##i##a = dot4<LeftUnsigned>(c##i##a, l, r0);  \
    c##i##b = dot4<LeftUnsigned>(c##i##b, l, r1);  \
  }
    KILN_QGEMM_ROWS(KILN_STEP)
    left += 4 * kMr;
    right += 4 * kNr;
  }
#define KILN_STORE(i)                                                             \
  if constexpr (Rows > i) {                                                       \
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(tile + i * kNr), c##i##a);     \
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(tile + i * kNr + 8), c##i##b); \
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
      return tile6x16<1, LeftUnsigned>(kGroups, left, right, tile);
    case 2:
      return tile6x16<2, LeftUnsigned>(kGroups, left, right, tile);
    case 3:
      return tile6x16<3, LeftUnsigned>(kGroups, left, right, tile);
    case 4:
      return tile6x16<4, LeftUnsigned>(kGroups, left, right, tile);
    case 5:
      return tile6x16<5, LeftUnsigned>(kGroups, left, right, tile);
    default:
      return tile6x16<6, LeftUnsigned>(kGroups, left, right, tile);
  }
}

void kernel6x16(int64_t kGroups, const uint8_t* left, const uint8_t* right, int32_t* tile,
                int64_t rows, bool leftUnsigned) {
  if (leftUnsigned) return dispatchRows<true>(kGroups, left, right, tile, rows);
  dispatchRows<false>(kGroups, left, right, tile, rows);
}

}  // namespace

const QGemmKernelInfo& qgemmKernelAvxVnni() {
  static const QGemmKernelInfo info{CpuIsa::kAvxVnni, "u8s8_gemm_6x16_avxvnni", kMr, kNr,
                                    kernel6x16};
  return info;
}

}  // namespace kiln::cpu
