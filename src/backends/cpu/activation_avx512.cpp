// The fused-activation epilogue on 16-float vectors, the row tail done with masked loads and
// stores so that no scalar code is compiled here (it would be shared with the AVX2 build).
#include <immintrin.h>

#include "backends/cpu/activation_row.h"
#include "backends/cpu/activation_simd.h"

namespace kiln::cpu::detail {
namespace {

using Float16Lanes = float __attribute__((vector_size(64)));
using Int16Lanes = int32_t __attribute__((vector_size(64)));

constexpr __mmask16 kAllLanes = 0xFFFF;
inline __mmask16 firstLanes(int64_t count) {
  return count >= 16 ? kAllLanes : __mmask16((1u << count) - 1);
}

// Full vectors two at a time (the two exp chains overlap; no per-vector tail mask), then the rest
// of the row with masked loads and stores. in(i, m) gives the input vector at i, out(i, m, v)
// stores.
template <ActivationKind K, typename In, typename Out>
inline void forEachVector(const Activation& a, int64_t n, In in, Out out) {
  auto act = [&](__m512 v) {
    return __m512(simd::activate<K, Float16Lanes, Int16Lanes>(a, Float16Lanes(v)));
  };
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 y0 = act(in(i, kAllLanes)), y1 = act(in(i + 16, kAllLanes));
    out(i, kAllLanes, y0);
    out(i + 16, kAllLanes, y1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = firstLanes(n - i);
    out(i, m, act(in(i, m)));
  }
}

template <ActivationKind K, bool kBiasPerElement>
void epilogueLoop(const Activation& a, float* row, int64_t n, const float* bias,
                  const float* residual) {
  const __m512 rowBias = _mm512_set1_ps(kBiasPerElement || !bias ? 0.0f : *bias);
  auto in = [&](int64_t i, __mmask16 m) {
    __m512 v = _mm512_maskz_loadu_ps(m, row + i);
    if constexpr (kBiasPerElement) {
      if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + i));
    } else {
      v = _mm512_add_ps(v, rowBias);
    }
    if (residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, residual + i));
    return v;
  };
  auto out = [&](int64_t i, __mmask16 m, __m512 v) { _mm512_mask_storeu_ps(row + i, m, v); };
  // The plain activation (the NchwcConv bands) without the bias and residual tests in the loop.
  if (!bias && !residual) {
    forEachVector<K>(
        a, n, [&](int64_t i, __mmask16 m) { return _mm512_maskz_loadu_ps(m, row + i); }, out);
  } else {
    forEachVector<K>(a, n, in, out);
  }
}

template <ActivationKind K>
void activationLoop(const Activation& a, const float* x, float* y, int64_t n) {
  forEachVector<K>(
      a, n, [&](int64_t i, __mmask16 m) { return _mm512_maskz_loadu_ps(m, x + i); },
      [&](int64_t i, __mmask16 m, __m512 v) { _mm512_mask_storeu_ps(y + i, m, v); });
}

}  // namespace

void applyActivationAvx512(const Activation& act, const float* x, float* y, int64_t n) {
  simd::withActivationKind(act.kind,
                           [&](auto kind) { activationLoop<decltype(kind)::value>(act, x, y, n); });
}

void applyEpilogueAvx512(const Activation& act, float* row, int64_t n, const float* bias,
                         bool biasPerElement, const float* residual) {
  simd::withActivationKind(act.kind, [&](auto kind) {
    if (biasPerElement)
      epilogueLoop<decltype(kind)::value, true>(act, row, n, bias, residual);
    else
      epilogueLoop<decltype(kind)::value, false>(act, row, n, bias, residual);
  });
}

}  // namespace kiln::cpu::detail
