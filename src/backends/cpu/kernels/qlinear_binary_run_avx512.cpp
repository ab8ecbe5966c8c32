// qlinear_binary_run.cpp's arithmetic sixteen float lanes at a time, for runs whose steps are 0 or
// 1: the same float operations in the same order, so the same bytes ((q - zp) is taken in int32
// before the conversion, which is exact). Saturation comes before the rounding: the bounds
// lowest - zp and highest - zp are integers, and rounding is monotonic and keeps integers, so
// round(clamp(v)) + zp equals clamp(round(v) + zp). Blocks of 64 clamp only from above in float
// (min(hi, v) keeps a NaN, which converts to INT32_MIN like any value below the range) and leave
// the lower bound to the saturating 16-bit packs, zero-point add and byte packs; the masked tail
// clamps both ends in float (max returns its second operand, the lower bound, for NaN).
#include <immintrin.h>

#include <limits>
#include <type_traits>

#include "backends/cpu/kernels/qlinear_binary_run.h"

namespace kiln::cpu {
namespace {

// GCC 12 warns that the conversions' own `_mm512_undefined_*` pass-through "may be used
// uninitialized" (a GCC 12 false positive, as in gemm/sgemv_avx512.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

inline __mmask16 lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

template <typename T>
__m512i loadSixteen(const T* p, __mmask16 m) {
  const __m128i bytes = _mm_maskz_loadu_epi8(m, p);
  if constexpr (std::is_same_v<T, uint8_t>) return _mm512_cvtepu8_epi32(bytes);
  return _mm512_cvtepi8_epi32(bytes);
}

// One operand of the run: sixteen dequantized lanes from memory, or (kRepeated) one value.
template <typename T, bool kRepeated>
struct Operand {
  const T* p;
  __m512i zeroPoint;
  __m512 scale, repeated;
  Operand(const T* data, FloatQuantization q)
      : p(data),
        zeroPoint(_mm512_set1_epi32(static_cast<int32_t>(q.zeroPoint))),
        scale(_mm512_set1_ps(q.scale)),
        repeated(_mm512_set1_ps((static_cast<float>(*data) - q.zeroPoint) * q.scale)) {}
  __m512 at(int64_t j, __mmask16 m) const {
    if constexpr (kRepeated) return repeated;
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(loadSixteen(p + j, m), zeroPoint)),
                         scale);
  }
};

// The sixteen int32 lanes of one block, rounded and saturated as the header explains.
template <QLinearBinaryOp kOp, typename X, typename Y>
struct Requantize {
  const X& x;
  const Y& y;
  __m512 scale, lo, hi;
  __m512i zeroPoint;
  __m512 scaled(int64_t j, __mmask16 m) const {
    const __m512 a = x.at(j, m), b = y.at(j, m);
    const __m512 v = kOp == QLinearBinaryOp::kMul ? _mm512_mul_ps(a, b) : _mm512_add_ps(a, b);
    return _mm512_div_ps(v, scale);
  }
  // Rounded half to even (the MXCSR default, as nearbyint in the scalar code), at most hi.
  __m512i below(int64_t j) const {
    return _mm512_cvtps_epi32(_mm512_min_ps(hi, scaled(j, __mmask16(0xffff))));
  }
  // Rounded, in [lowest, highest].
  __m512i at(int64_t j, __mmask16 m) const {
    const __m512 clamped = _mm512_min_ps(_mm512_max_ps(scaled(j, m), lo), hi);
    return _mm512_add_epi32(_mm512_cvtps_epi32(clamped), zeroPoint);
  }
};

template <QLinearBinaryOp kOp, typename Q, typename X, typename Y>
void runLanes(const X& x, const Y& y, Q* out, int64_t n, FloatQuantization qc) {
  constexpr float lowest = std::numeric_limits<Q>::lowest(),
                  highest = std::numeric_limits<Q>::max();
  const Requantize<kOp, X, Y> r{x,
                                y,
                                _mm512_set1_ps(qc.scale),
                                _mm512_set1_ps(lowest - qc.zeroPoint),
                                _mm512_set1_ps(highest - qc.zeroPoint),
                                _mm512_set1_epi32(static_cast<int32_t>(qc.zeroPoint))};
  const __m512i zeroPoint = _mm512_set1_epi16(static_cast<int16_t>(qc.zeroPoint));
  // Packing four blocks with the in-lane packs leaves 128-bit lane k holding four bytes of each
  // block in turn; this puts the dwords back in block order.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) {
    const __m512i w0 =
                      _mm512_adds_epi16(_mm512_packs_epi32(r.below(j), r.below(j + 16)), zeroPoint),
                  w1 = _mm512_adds_epi16(_mm512_packs_epi32(r.below(j + 32), r.below(j + 48)),
                                         zeroPoint);
    const __m512i bytes =
        std::is_same_v<Q, uint8_t> ? _mm512_packus_epi16(w0, w1) : _mm512_packs_epi16(w0, w1);
    _mm512_storeu_si512(out + j, _mm512_permutexvar_epi32(order, bytes));
  }
  for (; j < n; j += 16) {
    const __mmask16 m = lanes(n - j);
    _mm512_mask_cvtepi32_storeu_epi8(out + j, m, r.at(j, m));
  }
}

template <QLinearBinaryOp kOp, typename A, typename B, typename Q>
void runSteps(const A* a, int64_t stepA, FloatQuantization qa, const B* b, int64_t stepB,
              FloatQuantization qb, Q* out, int64_t n, FloatQuantization qc) {
  if (stepA == 1 && stepB == 1) {
    runLanes<kOp>(Operand<A, false>(a, qa), Operand<B, false>(b, qb), out, n, qc);
  } else if (stepA == 1) {
    runLanes<kOp>(Operand<A, false>(a, qa), Operand<B, true>(b, qb), out, n, qc);
  } else if (stepB == 1) {
    runLanes<kOp>(Operand<A, true>(a, qa), Operand<B, false>(b, qb), out, n, qc);
  } else {
    runLanes<kOp>(Operand<A, true>(a, qa), Operand<B, true>(b, qb), out, n, qc);
  }
}

#pragma GCC diagnostic pop

}  // namespace

template <typename A, typename B, typename Q>
void qlinearBinaryRunAvx512(QLinearBinaryOp op, const A* a, int64_t stepA, FloatQuantization qa,
                            const B* b, int64_t stepB, FloatQuantization qb, Q* out, int64_t n,
                            FloatQuantization qc) {
  if (n <= 0) return;
  if (op == QLinearBinaryOp::kMul)
    runSteps<QLinearBinaryOp::kMul>(a, stepA, qa, b, stepB, qb, out, n, qc);
  else
    runSteps<QLinearBinaryOp::kAdd>(a, stepA, qa, b, stepB, qb, out, n, qc);
}

#define KILN_QLINEAR_BINARY_RUN(A, B, Q)                                                           \
  template void qlinearBinaryRunAvx512<A, B, Q>(                                                   \
      QLinearBinaryOp, const A*, int64_t, FloatQuantization, const B*, int64_t, FloatQuantization, \
      Q*, int64_t, FloatQuantization);
KILN_QLINEAR_BINARY_TYPES(KILN_QLINEAR_BINARY_RUN)
#undef KILN_QLINEAR_BINARY_RUN

}  // namespace kiln::cpu
