// exp for float, as a scalar function and on 8-float vectors.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cpu/kernels/reduce_simd.h"

namespace kiln::cpu {

// exp(x) within ~2 ulp for x in [-87.3, 88.3]; inputs outside are clamped to that range (so
// very negative x give ~1e-38 rather than a subnormal or 0; softmax inputs are <= 0).
// x = n * ln2 + r with |r| <= ln2 / 2 (ln2 split in two so n * ln2 is exact enough), then a
// degree-7 Taylor polynomial of exp(r) scaled by 2^n built in the exponent bits.
template <typename V, typename I>
inline V expKernel(V x) {
  auto constant = [](float c) {
    if constexpr (std::is_same_v<V, float>) return c;
    else return splat(c);
  };
  x = x < constant(-87.3f) ? constant(-87.3f) : x;
  x = x > constant(88.3f) ? constant(88.3f) : x;
  const V roundingShift = constant(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const V n = (x * 1.44269504088896341f + roundingShift) - roundingShift;
  const V r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  V p = r * (1.0f / 5040.0f) + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
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

}  // namespace kiln::cpu
