// 8-float vectors (GCC/Clang vector extensions) for the reduction and softmax loops: without
// -fno-trapping-math the auto-vectorizer will not if-convert float comparisons (max, min,
// clamps), so those loops are written on explicit vectors.
#pragma once
#include <cstdint>
#include <cstring>

namespace kiln::cpu {

using Float8 = float __attribute__((vector_size(32)));
using Int8 = int32_t __attribute__((vector_size(32)));

inline Float8 splat(float v) { return Float8{v, v, v, v, v, v, v, v}; }
inline Float8 load8(const float* p) {
  Float8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(float* p, Float8 v) { std::memcpy(p, &v, sizeof v); }
inline Float8 max8(Float8 a, Float8 b) { return a > b ? a : b; }
inline float horizontalMax(Float8 v) {
  float m = v[0];
  for (int l = 1; l < 8; ++l) m = v[l] > m ? v[l] : m;
  return m;
}
inline float horizontalSum(Float8 v) {
  float s = 0;
  for (int l = 0; l < 8; ++l) s += v[l];
  return s;
}

}  // namespace kiln::cpu
