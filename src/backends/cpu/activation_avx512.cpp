// The fused-activation epilogue on 16-float vectors, the row tail done with masked loads and
// stores so that no scalar code is compiled here (it would be shared with the AVX2 build).
#include <immintrin.h>

#include "backends/cpu/activation_row.h"
#include "backends/cpu/activation_simd.h"

namespace kiln::cpu::detail {
namespace {

using Float16Lanes = float __attribute__((vector_size(64)));
using Int16Lanes = int32_t __attribute__((vector_size(64)));

template <ActivationKind K, bool kBiasPerElement>
void epilogueLoop(const Activation& a, float* row, int64_t n, const float* bias, const float* residual) {
  const __m512 rowBias = _mm512_set1_ps(kBiasPerElement || !bias ? 0.0f : *bias);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    __m512 v = _mm512_maskz_loadu_ps(m, row + i);
    if constexpr (kBiasPerElement) {
      if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + i));
    } else {
      v = _mm512_add_ps(v, rowBias);
    }
    if (residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, residual + i));
    const Float16Lanes r = simd::activate<K, Float16Lanes, Int16Lanes>(a, Float16Lanes(v));
    _mm512_mask_storeu_ps(row + i, m, __m512(r));
  }
}

template <ActivationKind K>
void activationLoop(const Activation& a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const Float16Lanes v(_mm512_maskz_loadu_ps(m, x + i));
    _mm512_mask_storeu_ps(y + i, m, __m512(simd::activate<K, Float16Lanes, Int16Lanes>(a, v)));
  }
}

}  // namespace

void applyActivationAvx512(const Activation& act, const float* x, float* y, int64_t n) {
  simd::withActivationKind(act.kind, [&](auto kind) { activationLoop<decltype(kind)::value>(act, x, y, n); });
}

void applyEpilogueAvx512(const Activation& act, float* row, int64_t n, const float* bias, bool biasPerElement,
                         const float* residual) {
  simd::withActivationKind(act.kind, [&](auto kind) {
    if (biasPerElement) epilogueLoop<decltype(kind)::value, true>(act, row, n, bias, residual);
    else epilogueLoop<decltype(kind)::value, false>(act, row, n, bias, residual);
  });
}

}  // namespace kiln::cpu::detail
