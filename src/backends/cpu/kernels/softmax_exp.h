// exp for float, as a scalar function and on 8- or 16-float vectors, and the row softmax built on
// it (Softmax, kiln::FusedAttention).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels/reduce_simd.h"

namespace kiln::cpu {

/// exp(r) for |r| <= ln2 / 2: the degree-7 Taylor polynomial (truncation error < 6e-9).
template <typename V>
inline V expPolynomial(V r) {
  V p = r * (1.0f / 5040.0f) + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  return p * r + 1.0f;
}

// exp(x) within ~2 ulp for x in [-87.3, 88.3]; inputs outside are clamped to that range (so
// very negative x give ~1e-38 rather than a subnormal or 0; softmax inputs are <= 0).
// x = n * ln2 + r with |r| <= ln2 / 2 (ln2 split in two so n * ln2 is exact enough), then a
// degree-7 Taylor polynomial of exp(r) scaled by 2^n built in the exponent bits.
template <typename V, typename I>
inline V expKernel(V x) {
  auto constant = [](float c) {
    if constexpr (std::is_same_v<V, float>) return c;
    else return V{} + c;
  };
  x = x < constant(-87.3f) ? constant(-87.3f) : x;
  x = x > constant(88.3f) ? constant(88.3f) : x;
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
inline void softmaxRowsOn(float* x, int64_t ld, const float* mask, int64_t maskLd, int64_t rows, int64_t n) {
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

void softmaxRowsAvx512(float* x, int64_t ld, const float* mask, int64_t maskLd, int64_t rows, int64_t n);

}  // namespace detail

/// In place, for each of `rows` rows of n >= 1 floats (row stride ld): x += mask row (when mask is
/// not null; mask rows maskLd apart, 0 = one row for all), then x = softmax(x): exp(x - max) / sum.
/// Picks the AVX-512 code when activeCpuIsa() allows it.
inline void softmaxRows(float* x, int64_t ld, const float* mask, int64_t maskLd, int64_t rows, int64_t n) {
  if (activeCpuIsa() >= CpuIsa::kAvx512) {
    detail::softmaxRowsAvx512(x, ld, mask, maskLd, rows, n);
  } else {
    detail::softmaxRowsOn<Float8, Int8>(x, ld, mask, maskLd, rows, n);
  }
}

}  // namespace kiln::cpu
