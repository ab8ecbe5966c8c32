// u8s8_gemm_4x16_avx2: 4 rows x 16 columns (two ymm of 8 int32) on plain AVX2, which has no
// vpdpbusd. vpmaddubsw multiplies u8 by s8 and adds each pair of products into an int16 with
// saturation, vpmaddwd by ones then adds the pairs of int16 into int32.
//
// That pair sum u0*s0 + u1*s1 can reach 255 * 2 * 128 = 65280 and saturate, so two kernels:
// - kernelMaddubs, for weights that are maddubsSafe (in every pair the positive weights sum to at
//   most 128 and the negative ones to at least -128: 255 * 128 = 32640 fits int16), one
//   vpmaddubsw per product;
// - kernel, exact for any input: u = 2 * (u >> 1) + (u & 1); with u >> 1 <= 127 a pair sum is at
//   most 127 * 2 * 128 = 32512, and with u & 1 at most 256, so both vpmaddubsw are exact and
//   vpmaddwd by 2 and by 1 combine them in int32.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/qgemm/qgemm_kernels.h"

namespace kiln::cpu {
namespace {

constexpr int kMr = 4, kNr = 16;

inline __m256i broadcastLane(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

// The u8 operand split as u = 2 * hi + lo.
struct SplitU8 {
  __m256i hi, lo;
};

inline SplitU8 split(__m256i u) {
  return {_mm256_and_si256(_mm256_srli_epi16(u, 1), _mm256_set1_epi8(0x7f)),
          _mm256_and_si256(u, _mm256_set1_epi8(1))};
}

// acc + the 4-k dot products of u (u8) and s (s8) in each int32 lane.
template <bool Exact>
inline __m256i dot4(__m256i acc, __m256i u, const SplitU8& us, __m256i s) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (Exact) {
    const __m256i hi = _mm256_madd_epi16(_mm256_maddubs_epi16(us.hi, s), _mm256_set1_epi16(2));
    const __m256i lo = _mm256_madd_epi16(_mm256_maddubs_epi16(us.lo, s), ones);
    return _mm256_add_epi32(acc, _mm256_add_epi32(hi, lo));
  } else {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones));
  }
}

// Named accumulators, not an array (qgemm_kernel_avx512vnni.cpp says why).
#define KILN_QGEMM_ROWS(X) X(0) X(1) X(2) X(3)
template <int Rows, bool LeftUnsigned, bool Exact>
void tile4x16(int64_t kGroups, const uint8_t* left, const uint8_t* right, int32_t* tile) {
#define KILN_ZERO(i) __m256i c##i##a = _mm256_setzero_si256(), c##i##b = c##i##a;
  KILN_QGEMM_ROWS(KILN_ZERO)
  for (int64_t g = 0; g < kGroups; ++g) {
    const __m256i r0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(right));
    const __m256i r1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(right + 32));
    if constexpr (LeftUnsigned) {
#define KILN_STEP(i)                                 \
  if constexpr (Rows > i) {                          \
    const __m256i l = broadcastLane(left + 4 * i);   \
    const SplitU8 ls = Exact ? split(l) : SplitU8{}; \
    c##i##a = dot4<Exact>(c##i##a, l, ls, r0);       \
    c##i##b = dot4<Exact>(c##i##b, l, ls, r1);       \
  }
      KILN_QGEMM_ROWS(KILN_STEP)
#undef KILN_STEP
    } else {
      const SplitU8 s0 = Exact ? split(r0) : SplitU8{}, s1 = Exact ? split(r1) : SplitU8{};
#define KILN_STEP(i)                               \
  if constexpr (Rows > i) {                        \
    const __m256i l = broadcastLane(left + 4 * i); \
    c##i##a = dot4<Exact>(c##i##a, r0, s0, l);     \
    c##i##b = dot4<Exact>(c##i##b, r1, s1, l);     \
  }
      KILN_QGEMM_ROWS(KILN_STEP)
#undef KILN_STEP
    }
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
#undef KILN_STORE
}
#undef KILN_QGEMM_ROWS

template <bool LeftUnsigned, bool Exact>
void dispatchRows(int64_t kGroups, const uint8_t* left, const uint8_t* right, int32_t* tile,
                  int64_t rows) {
  switch (rows) {
    case 1:
      return tile4x16<1, LeftUnsigned, Exact>(kGroups, left, right, tile);
    case 2:
      return tile4x16<2, LeftUnsigned, Exact>(kGroups, left, right, tile);
    case 3:
      return tile4x16<3, LeftUnsigned, Exact>(kGroups, left, right, tile);
    default:
      return tile4x16<4, LeftUnsigned, Exact>(kGroups, left, right, tile);
  }
}

template <bool Exact>
void kernel4x16(int64_t kGroups, const uint8_t* left, const uint8_t* right, int32_t* tile,
                int64_t rows, bool leftUnsigned) {
  if (leftUnsigned) return dispatchRows<true, Exact>(kGroups, left, right, tile, rows);
  dispatchRows<false, Exact>(kGroups, left, right, tile, rows);
}

}  // namespace

const QGemmKernelInfo& qgemmKernelAvx2() {
  static const QGemmKernelInfo info{CpuIsa::kAvx2, "u8s8_gemm_4x16_avx2", kMr,
                                    kNr,           kernel4x16<true>,      kernel4x16<false>};
  return info;
}

}  // namespace kiln::cpu
