// The fused activations written once on any float vector type V (GCC vector extensions, with I
// the matching int32 vector) or on plain float, and picked at compile time by kind, so that a
// kernel's inner loop carries no switch. activation.cpp instantiates them on 8-float vectors,
// the *_avx512.cpp kernels on 16-float vectors (distinct types, so no inline code is shared).
#pragma once
#include <cstdint>
#include <type_traits>

#include "backends/cpu/activation.h"
#include "backends/cpu/kernels/softmax_exp.h"

namespace kiln::cpu::simd {

template <typename V>
inline V broadcast(float c) {
  if constexpr (std::is_same_v<V, float>) return c;
  else return V{} + c;
}

template <typename V>
inline V maxOf(V a, V b) { return a > b ? a : b; }
template <typename V>
inline V minOf(V a, V b) { return a < b ? a : b; }

template <typename V, typename I>
inline V sigmoidOf(V x) {
  // 1 / (1 + exp(-x)); exp is clamped inside, so large |x| give 0 or 1 without NaNs.
  return broadcast<V>(1.0f) / (broadcast<V>(1.0f) + expKernel<V, I>(-x));
}

// erf(x) by Abramowitz & Stegun 7.1.26 refined: |error| < 1.5e-7, odd symmetry restored by sign.
template <typename V, typename I>
inline V erfOf(V x) {
  const V ax = maxOf<V>(x, -x);
  const V t = broadcast<V>(1.0f) / (broadcast<V>(1.0f) + broadcast<V>(0.3275911f) * ax);
  V p = t * broadcast<V>(1.061405429f) + broadcast<V>(-1.453152027f);
  p = p * t + broadcast<V>(1.421413741f);
  p = p * t + broadcast<V>(-0.284496736f);
  p = p * t + broadcast<V>(0.254829592f);
  p = p * t;
  const V e = broadcast<V>(1.0f) - p * expKernel<V, I>(-ax * ax);
  return x < broadcast<V>(0.0f) ? -e : e;
}

/// act(x) for the activation kind K (parameters from a).
template <ActivationKind K, typename V, typename I>
inline V activate(const Activation& a, V x) {
  if constexpr (K == ActivationKind::kRelu) return maxOf<V>(x, broadcast<V>(0.0f));
  else if constexpr (K == ActivationKind::kClip) return minOf<V>(maxOf<V>(x, broadcast<V>(a.alpha)), broadcast<V>(a.beta));
  else if constexpr (K == ActivationKind::kLeakyRelu) return x < broadcast<V>(0.0f) ? x * a.alpha : x;
  else if constexpr (K == ActivationKind::kSigmoid) return sigmoidOf<V, I>(x);
  else if constexpr (K == ActivationKind::kHardSigmoid)
    return minOf<V>(maxOf<V>(x * a.alpha + a.beta, broadcast<V>(0.0f)), broadcast<V>(1.0f));
  else if constexpr (K == ActivationKind::kHardSwish)
    return x * minOf<V>(maxOf<V>(x * (1.0f / 6.0f) + 0.5f, broadcast<V>(0.0f)), broadcast<V>(1.0f));
  else if constexpr (K == ActivationKind::kSiLU) return x * sigmoidOf<V, I>(x);
  else if constexpr (K == ActivationKind::kGelu) return x * 0.5f * (broadcast<V>(1.0f) + erfOf<V, I>(x * 0.70710678118654752f));
  else return x;
}

/// Calls fn(std::integral_constant<ActivationKind, kind>) with the kind as a compile-time constant.
template <typename Fn>
inline decltype(auto) withActivationKind(ActivationKind kind, Fn&& fn) {
  using K = ActivationKind;
  switch (kind) {
    case K::kRelu: return fn(std::integral_constant<K, K::kRelu>{});
    case K::kClip: return fn(std::integral_constant<K, K::kClip>{});
    case K::kLeakyRelu: return fn(std::integral_constant<K, K::kLeakyRelu>{});
    case K::kSigmoid: return fn(std::integral_constant<K, K::kSigmoid>{});
    case K::kHardSigmoid: return fn(std::integral_constant<K, K::kHardSigmoid>{});
    case K::kHardSwish: return fn(std::integral_constant<K, K::kHardSwish>{});
    case K::kSiLU: return fn(std::integral_constant<K, K::kSiLU>{});
    case K::kGelu: return fn(std::integral_constant<K, K::kGelu>{});
    case K::kNone: break;
  }
  return fn(std::integral_constant<K, K::kNone>{});
}

}  // namespace kiln::cpu::simd

namespace kiln::cpu::detail {

/// applyEpilogue (biasPerElement false: one bias value *bias, may be null) and
/// applyEpilogueWithBiasRow (true) on 16-float vectors; call only when the CPU has AVX-512.
void applyEpilogueAvx512(const Activation& act, float* row, int64_t n, const float* bias, bool biasPerElement,
                         const float* residual);

}  // namespace kiln::cpu::detail
