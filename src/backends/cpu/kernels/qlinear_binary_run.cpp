#include "backends/cpu/kernels/qlinear_binary_run.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/cpu_isa.h"

namespace kiln::cpu {
namespace {

template <typename T>
constexpr bool kIsEightBit = std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>;

template <typename Q>
float quantizeScalar(float x, FloatQuantization q) {
  constexpr float lowest = std::numeric_limits<Q>::lowest(),
                  highest = std::numeric_limits<Q>::max();
  const float scaled = x / q.scale;
  if (std::isnan(scaled)) return lowest;
  return std::clamp(std::nearbyint(scaled) + q.zeroPoint, lowest, highest);
}

template <typename T>
__m256 loadEight(const T* p) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  if constexpr (std::is_same_v<T, uint8_t>) return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
}

// The eight lanes dequantized: from memory (step 1) or one element repeated (step 0).
template <typename T>
__m256 dequantizeEight(const T* p, int64_t step, FloatQuantization q) {
  if (step == 0) return _mm256_set1_ps((static_cast<float>(*p) - q.zeroPoint) * q.scale);
  return _mm256_mul_ps(_mm256_sub_ps(loadEight(p), _mm256_set1_ps(q.zeroPoint)),
                       _mm256_set1_ps(q.scale));
}

template <typename Q>
void quantizeEight(__m256 x, FloatQuantization q, Q* out) {
  __m256 v = _mm256_round_ps(_mm256_div_ps(x, _mm256_set1_ps(q.scale)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  v = _mm256_add_ps(v, _mm256_set1_ps(q.zeroPoint));
  // max returns its second operand when the first is NaN: NaN saturates to the lowest value.
  v = _mm256_max_ps(v, _mm256_set1_ps(static_cast<float>(std::numeric_limits<Q>::lowest())));
  v = _mm256_min_ps(v, _mm256_set1_ps(static_cast<float>(std::numeric_limits<Q>::max())));
  const __m256i ints = _mm256_cvtps_epi32(v);
  const __m128i words =
      _mm_packs_epi32(_mm256_castsi256_si128(ints), _mm256_extracti128_si256(ints, 1));
  const __m128i bytes =
      std::is_same_v<Q, uint8_t> ? _mm_packus_epi16(words, words) : _mm_packs_epi16(words, words);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), bytes);
}

}  // namespace

template <typename A, typename B, typename Q>
void qlinearBinaryRun(QLinearBinaryOp op, const A* a, int64_t stepA, FloatQuantization qa,
                      const B* b, int64_t stepB, FloatQuantization qb, Q* out, int64_t n,
                      FloatQuantization qc) {
  static_assert(kIsEightBit<A> && kIsEightBit<B> && kIsEightBit<Q>);
  const bool mul = op == QLinearBinaryOp::kMul;
  int64_t j = 0;
  if ((stepA == 0 || stepA == 1) && (stepB == 0 || stepB == 1)) {
    if (cpuSupports(CpuIsa::kAvx512)) {
      qlinearBinaryRunAvx512(op, a, stepA, qa, b, stepB, qb, out, n, qc);
      return;
    }
    for (; j + 8 <= n; j += 8) {
      const __m256 x = dequantizeEight(a + j * stepA, stepA, qa),
                   y = dequantizeEight(b + j * stepB, stepB, qb);
      quantizeEight(mul ? _mm256_mul_ps(x, y) : _mm256_add_ps(x, y), qc, out + j);
    }
  }
  for (; j < n; ++j) {
    const float x = (static_cast<float>(a[j * stepA]) - qa.zeroPoint) * qa.scale;
    const float y = (static_cast<float>(b[j * stepB]) - qb.zeroPoint) * qb.scale;
    out[j] = static_cast<Q>(quantizeScalar<Q>(mul ? x * y : x + y, qc));
  }
}

#define KILN_QLINEAR_BINARY_RUN(A, B, Q)                                                         \
  template void qlinearBinaryRun<A, B, Q>(QLinearBinaryOp, const A*, int64_t, FloatQuantization, \
                                          const B*, int64_t, FloatQuantization, Q*, int64_t,     \
                                          FloatQuantization);
KILN_QLINEAR_BINARY_TYPES(KILN_QLINEAR_BINARY_RUN)
#undef KILN_QLINEAR_BINARY_RUN

}  // namespace kiln::cpu
