// exp for float, as a scalar function and on 8- or 16-float vectors, and the row softmax built on
// it (Softmax, kiln::FusedAttention).
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels/reduce_simd.h"
#include "core/internal_api.h"

namespace kiln::cpu {

/// exp(r) for |r| <= ln2 / 2: a degree-6 minimax polynomial with p(0) = 1 exactly (relative
/// error < 3e-9, a fortieth of a float ulp; one FMA fewer than the degree-7 Taylor polynomial).
template <typename V>
inline V expPolynomial(V r) {
  V p = r * 1.4061240945e-03f + 8.3790114149e-03f;
  p = p * r + 4.1664775461e-02f;
  p = p * r + 1.6666366160e-01f;
  p = p * r + 5.0000005960e-01f;
  p = p * r + 1.0f;
  return p * r + 1.0f;
}

/// 2^(j/16) for j = 0..15, rounded to float: the table of expOn16Lanes.
alignas(64) inline constexpr float kExp2Sixteenths[16] = {
    1.0f,        1.04427373f, 1.09050775f, 1.13878858f, 1.18920708f, 1.24185777f,
    1.29683959f, 1.35425556f, 1.41421354f, 1.47682619f, 1.54221082f, 1.61049032f,
    1.68179286f, 1.75625217f, 1.8340081f,  1.91520655f};

/// exp(t) on 16 lanes (AVX-512; instantiate only in *_avx512.cpp files) for t in [-150, 88.7], NaN
/// kept; results below FLT_MIN are correctly scaled subnormals, t < -149 * ln2 gives 0. t = (m +
/// j/16) ln2 + r with |r| <= ln2 / 32: 2^(j/16) is one vpermps from a register table, exp(r) - 1 a
/// degree-3 Taylor polynomial (truncation < 1e-8), 2^m one vscalefps. About 1 ulp; two vector
/// operations fewer than the degree-6 polynomial on |r| <= ln2 / 2. The all-lanes maskz forms avoid
/// a false GCC 12 warning about _mm512_undefined_ps in the plain ones.
template <typename V>
inline V expOn16Lanes(V t) {
  static_assert(sizeof(V) == 64);
  const __mmask16 all = 0xFFFF;
  const __m512 x = __m512(t);
  // Adding 1.5 * 2^19 rounds t / ln2 to a multiple of 1/16, whose sixteenths j are the low 4 bits.
  const __m512 shift = _mm512_set1_ps(786432.0f);
  const __m512 s = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), shift);
  const __m512 m = _mm512_sub_ps(s, shift);
  __m512 r =
      _mm512_fnmadd_ps(m, _mm512_set1_ps(0.693359375f), x);  // ln2 in two parts: m * hi is exact
  r = _mm512_fmadd_ps(m, _mm512_set1_ps(2.12194440e-4f), r);
  const __m512 table =
      _mm512_maskz_permutexvar_ps(all, _mm512_castps_si512(s), _mm512_load_ps(kExp2Sixteenths));
  __m512 q = _mm512_fmadd_ps(r, _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f));
  q = _mm512_mul_ps(q, r);
  // vscalefps multiplies by 2^floor(m): the whole part of t / ln2 without the sixteenths.
  return V(_mm512_maskz_scalef_ps(all, _mm512_fmadd_ps(table, q, table), m));
}

// exp(x) within ~2 ulp for x in [-87.3, 88.3]; inputs outside are clamped to that range (so
// very negative x give ~1e-38 rather than a subnormal or 0; softmax inputs are <= 0).
// x = n * ln2 + r with |r| <= ln2 / 2 (ln2 split in two so n * ln2 is exact enough), then the
// degree-6 polynomial of exp(r) scaled by 2^n built in the exponent bits; on 16 lanes expOn16Lanes.
template <typename V, typename I>
inline V expKernel(V x) {
  auto constant = [](float c) {
    if constexpr (std::is_same_v<V, float>)
      return c;
    else
      return V{} + c;
  };
  if constexpr (std::is_same_v<V, float>) {
    if (x != x) return x;  // NaN stays NaN (and never reaches the float -> int conversion below)
  }
  x = x < constant(-87.3f) ? constant(-87.3f) : x;
  x = x > constant(88.3f) ? constant(88.3f) : x;
  if constexpr (sizeof(V) == 64) return expOn16Lanes<V>(x);
  const V roundingShift = constant(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const V n = (x * 1.44269504088896341f + roundingShift) - roundingShift;
  const V r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  const V p = expPolynomial<V>(r);
  I bits;
  if constexpr (std::is_same_v<V, float>) {
    bits = (static_cast<int32_t>(n) + 127) << 23;
  } else {
    bits = (__builtin_convertvector(n, I) + 127) << 23;
  }
  V scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline Float8 vectorExp(Float8 x) { return expKernel<Float8, Int8>(x); }
inline float vectorExp(float x) { return expKernel<float, int32_t>(x); }
inline double vectorExp(double x) { return std::exp(x); }

namespace detail {

/// softmaxRows on V vectors (Float8 for AVX2, 16 floats in softmax_avx512.cpp); the tail of a
/// row that does not fill a vector is done in scalars.
template <typename V, typename I>
inline void softmaxRowsOn(float* x, int64_t ld, const float* mask, int64_t maskLd, int64_t rows,
                          int64_t n) {
  constexpr int64_t kWidth = sizeof(V) / sizeof(float);
  auto load = [](const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  auto store = [](float* p, V v) { std::memcpy(p, &v, sizeof v); };
  const int64_t vectorEnd = n / kWidth * kWidth;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * ld;
    const float* m = mask ? mask + r * maskLd : nullptr;
    // Pass 1: add the mask, find the maximum.
    V vmax = V{} + row[0] + (m ? m[0] : 0.0f);
    for (int64_t j = 0; j < vectorEnd; j += kWidth) {
      V v = load(row + j);
      if (m) {
        v += load(m + j);
        store(row + j, v);
      }
      vmax = v > vmax ? v : vmax;
    }
    float max = vmax[0];
    for (int64_t l = 1; l < kWidth; ++l) max = vmax[l] > max ? vmax[l] : max;
    for (int64_t j = vectorEnd; j < n; ++j) {
      if (m) row[j] += m[j];
      max = row[j] > max ? row[j] : max;
    }
    // Pass 2: exponentials and their sum.
    V vsum = V{};
    const V shift = V{} + max;
    for (int64_t j = 0; j < vectorEnd; j += kWidth) {
      const V e = expKernel<V, I>(load(row + j) - shift);
      store(row + j, e);
      vsum += e;
    }
    float sum = 0;
    for (int64_t l = 0; l < kWidth; ++l) sum += vsum[l];
    for (int64_t j = vectorEnd; j < n; ++j) {
      row[j] = expKernel<float, int32_t>(row[j] - max);
      sum += row[j];
    }
    // Pass 3: normalize.
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < vectorEnd; j += kWidth) store(row + j, load(row + j) * inv);
    for (int64_t j = vectorEnd; j < n; ++j) row[j] *= inv;
  }
}

KILN_INTERNAL_API void softmaxRowsAvx512(float* x, int64_t ld, const float* mask, int64_t maskLd,
                                         int64_t rows, int64_t n);

}  // namespace detail

/// In place, for each of `rows` rows of n >= 1 floats (row stride ld): x += mask row (when mask is
/// not null; mask rows maskLd apart, 0 = one row for all), then x = softmax(x): exp(x - max) / sum.
/// Picks the AVX-512 code when activeCpuIsa() allows it.
inline void softmaxRows(float* x, int64_t ld, const float* mask, int64_t maskLd, int64_t rows,
                        int64_t n) {
  if (activeCpuIsa() >= CpuIsa::kAvx512) {
    detail::softmaxRowsAvx512(x, ld, mask, maskLd, rows, n);
  } else {
    detail::softmaxRowsOn<Float8, Int8>(x, ld, mask, maskLd, rows, n);
  }
}

}  // namespace kiln::cpu
