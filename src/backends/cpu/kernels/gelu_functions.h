// Gelu's scalar functions, shared by ONNX Gelu and the com.microsoft Gelu family.
#pragma once
#include <cmath>

namespace kiln::cpu {

// Gelu(x) = x/2 * (1 + erf(x/sqrt2)) = x/2 * erfc(-x/sqrt2); erfc keeps precision for x << 0,
// where 1 + erf would cancel.
inline constexpr auto geluExact = [](auto x) {
  using V = decltype(x);
  return V(0.5) * x * std::erfc(-x * V(M_SQRT1_2));
};
// The tanh approximation x/2 * (1 + tanh(z)) is evaluated as x * sigmoid(2z), which does not
// cancel for z << 0.
inline constexpr auto geluTanh = [](auto x) {
  using V = decltype(x);
  const V twoSqrt2OverPi = V(1.5957691216057308);
  return x / (V(1) + std::exp(-twoSqrt2OverPi * (x + V(0.044715) * x * x * x)));
};

}  // namespace kiln::cpu
