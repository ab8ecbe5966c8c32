// The fused activations written once on any float vector type V (GCC vector extensions, with I
// the matching int32 vector) or on plain float, and picked at compile time by kind, so that a
// kernel's inner loop carries no switch. activation.cpp instantiates them on 8-float vectors,
// the *_avx512.cpp kernels on 16-float vectors (distinct types, so no inline code is shared).
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cpu/activation.h"
#include "backends/cpu/kernels/softmax_exp.h"

namespace kiln::cpu::simd {

template <typename V>
inline V broadcast(float c) {
  if constexpr (std::is_same_v<V, float>)
    return c;
  else
    return V{} + c;
}

template <typename V>
inline V maxOf(V a, V b) {
  return a > b ? a : b;
}
template <typename V>
inline V minOf(V a, V b) {
  return a < b ? a : b;
}

/// exp(t) for t <= 0 (or NaN, which stays NaN) over the whole range: results below FLT_MIN come
/// out as correctly scaled subnormals and t below -150 (exp(t) < 2^-216) as exactly 0. On 16 lanes
/// expOn16Lanes (table of 2^(j/16), scale by vscalefps); elsewhere expKernel's reduction and
/// polynomial with the scale 2^n (n >= -216) applied as two factors 2^(n/2) that are each normal.
template <typename V, typename I>
inline V expOfNonPositive(V t) {
  if constexpr (std::is_same_v<V, float>) {
    if (t != t) return t;
  }
  t = broadcast<V>(-150.0f) > t ? broadcast<V>(-150.0f) : t;  // this form is one maxps, NaN t kept
  if constexpr (sizeof(V) == 64) {
    return expOn16Lanes<V>(t);
  } else {
    const V roundingShift =
        broadcast<V>(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
    const V n = (t * 1.44269504088896341f + roundingShift) - roundingShift;
    const V r = (t - n * 0.693359375f) + n * 2.12194440e-4f;
    const V p = expPolynomial<V>(r);
    I half, rest;
    if constexpr (std::is_same_v<V, float>) {
      const int32_t ni = static_cast<int32_t>(n);
      half = ni >> 1;
      rest = ni - half;
    } else {
      const I ni = __builtin_convertvector(n, I);
      half = ni >> 1;
      rest = ni - half;
    }
    const I halfBits = (half + 127) << 23, restBits = (rest + 127) << 23;
    V s1, s2;
    std::memcpy(&s1, &halfBits, sizeof s1);
    std::memcpy(&s2, &restBits, sizeof s2);
    return p * s1 * s2;
  }
}

/// exp(-|x|), with -|x| clamped to -150 first. kKeepNaN: NaN x give NaN (sign-bit or plus maxps);
/// otherwise, on 16 lanes, one vrangeps (-min(|x|, 150)), which takes NaN x as 150 (exp 0): for
/// callers whose result carries NaN x through by itself (SiLU's numerator x).
template <typename V, typename I, bool kKeepNaN>
inline V expOfMinusAbs(V x) {
  if constexpr (sizeof(V) == 64 && !kKeepNaN) {
    return expOn16Lanes<V>(
        V(_mm512_maskz_range_ps(__mmask16(0xFFFF), __m512(x), _mm512_set1_ps(150.0f), 0xE)));
  } else if constexpr (sizeof(V) == 64) {
    const __m512 t = _mm512_or_ps(__m512(x), _mm512_set1_ps(-0.0f));
    // maxps returns its second operand, t, when t is NaN (maskz form: see expOn16Lanes).
    return expOn16Lanes<V>(V(_mm512_maskz_max_ps(__mmask16(0xFFFF), _mm512_set1_ps(-150.0f), t)));
  } else if constexpr (std::is_same_v<V, float>) {
    return expOfNonPositive<V, I>(-std::fabs(x));
  } else {
    return expOfNonPositive<V, I>(V(I(x) | (I{} + static_cast<int32_t>(0x80000000u))));
  }
}

/// num where x >= 0 (or NaN), num * e where x < 0: the numerators of sigmoid (num = 1) and SiLU
/// (num = x) over 1 + e with e = exp(-|x|). On 16 lanes the sign comes from one vpmovd2m.
template <typename V>
inline V timesExpWhereNegative(V x, V num, V e) {
  if constexpr (sizeof(V) == 64) {
    const __mmask16 negative = _mm512_movepi32_mask(_mm512_castps_si512(__m512(x)));
    return V(_mm512_mask_mul_ps(__m512(num), negative, __m512(num), __m512(e)));
  } else {
    return x < broadcast<V>(0.0f) ? num * e : num;
  }
}

/// 1 / (1 + exp(-x)) as e / (1 + e) for x < 0 and 1 / (1 + e) for x >= 0 with e = exp(-|x|), so
/// negative x keep full relative precision down to the subnormals; +-inf give 1 and 0 and NaN
/// stays NaN. The division is deliberate: vdivps runs on the divider beside the FMA ports, whereas
/// rcp14 plus a Newton-Raphson step adds three operations to ports this loop is bound by
/// (re-measured slower on Sapphire Rapids, alone and unrolled).
template <typename V, typename I>
inline V sigmoidOf(V x) {
  const V e = expOfMinusAbs<V, I, true>(x);
  return timesExpWhereNegative<V>(x, broadcast<V>(1.0f), e) / (broadcast<V>(1.0f) + e);
}

/// x * sigmoid(x) with one division: x / (1 + e) for x >= 0, x * e / (1 + e) for x < 0
/// (e = exp(-|x|)); -inf gives NaN (-inf * 0) as x * sigmoid(x) does, +inf gives +inf.
template <typename V, typename I>
inline V siluOf(V x) {
  const V e = expOfMinusAbs<V, I, false>(x);  // NaN x: the numerator x keeps it
  return timesExpWhereNegative<V>(x, x, e) / (broadcast<V>(1.0f) + e);
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
  if constexpr (K == ActivationKind::kRelu)
    return maxOf<V>(x, broadcast<V>(0.0f));
  else if constexpr (K == ActivationKind::kClip)
    return minOf<V>(maxOf<V>(x, broadcast<V>(a.alpha)), broadcast<V>(a.beta));
  else if constexpr (K == ActivationKind::kLeakyRelu)
    return x < broadcast<V>(0.0f) ? x * a.alpha : x;
  else if constexpr (K == ActivationKind::kSigmoid)
    return sigmoidOf<V, I>(x);
  else if constexpr (K == ActivationKind::kHardSigmoid)
    return minOf<V>(maxOf<V>(x * a.alpha + a.beta, broadcast<V>(0.0f)), broadcast<V>(1.0f));
  else if constexpr (K == ActivationKind::kHardSwish)
    return x * minOf<V>(maxOf<V>(x * (1.0f / 6.0f) + 0.5f, broadcast<V>(0.0f)), broadcast<V>(1.0f));
  else if constexpr (K == ActivationKind::kSiLU)
    return siluOf<V, I>(x);
  else if constexpr (K == ActivationKind::kGelu)
    return x * 0.5f * (broadcast<V>(1.0f) + erfOf<V, I>(x * 0.70710678118654752f));
  else
    return x;
}

/// Calls fn(std::integral_constant<ActivationKind, kind>) with the kind as a compile-time constant.
template <typename Fn>
inline decltype(auto) withActivationKind(ActivationKind kind, Fn&& fn) {
  using K = ActivationKind;
  switch (kind) {
    case K::kRelu:
      return fn(std::integral_constant<K, K::kRelu>{});
    case K::kClip:
      return fn(std::integral_constant<K, K::kClip>{});
    case K::kLeakyRelu:
      return fn(std::integral_constant<K, K::kLeakyRelu>{});
    case K::kSigmoid:
      return fn(std::integral_constant<K, K::kSigmoid>{});
    case K::kHardSigmoid:
      return fn(std::integral_constant<K, K::kHardSigmoid>{});
    case K::kHardSwish:
      return fn(std::integral_constant<K, K::kHardSwish>{});
    case K::kSiLU:
      return fn(std::integral_constant<K, K::kSiLU>{});
    case K::kGelu:
      return fn(std::integral_constant<K, K::kGelu>{});
    case K::kNone:
      break;
  }
  return fn(std::integral_constant<K, K::kNone>{});
}

}  // namespace kiln::cpu::simd

namespace kiln::cpu::detail {

/// applyEpilogue (biasPerElement false: one bias value *bias, may be null) and
/// applyEpilogueWithBiasRow (true) on 16-float vectors; call only when the CPU has AVX-512.
void applyEpilogueAvx512(const Activation& act, float* row, int64_t n, const float* bias,
                         bool biasPerElement, const float* residual);

}  // namespace kiln::cpu::detail
