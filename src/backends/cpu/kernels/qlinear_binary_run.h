// One broadcast run of kiln::QLinearAdd / kiln::QLinearMul: out[j] = Q(DQ(a[j*stepA]) op
// DQ(b[j*stepB])). Float32 arithmetic, where both steps are 0 or 1 sixteen lanes at a time on
// AVX-512 (qlinear_binary_run_avx512.cpp), else eight lanes and a scalar tail. It gives
// the bytes of the DequantizeLinear -> Add/Mul -> QuantizeLinear chain it replaces: (q - zp) *
// scale and x / scale are one correctly rounded float operation each (the reference kernels compute
// them in double and round to float, which is the same), then half-to-even rounding, the zero point
// and saturation; NaN gives Q's lowest value, as QuantizeLinear does.
#pragma once
#include <cstdint>

#include "core/internal_api.h"

namespace kiln::cpu {

struct FloatQuantization {
  float scale = 1.0f;
  float zeroPoint = 0.0f;
};

enum class QLinearBinaryOp { kAdd, kMul };

/// A and B are int8_t or uint8_t, Q likewise; steps are element strides (any value; 0 broadcasts).
/// Exported for the unit tests, which compare the AVX-512 and AVX2 code (setCpuIsaLimit).
template <typename A, typename B, typename Q>
KILN_INTERNAL_API void qlinearBinaryRun(QLinearBinaryOp op, const A* a, int64_t stepA,
                                        FloatQuantization qa, const B* b, int64_t stepB,
                                        FloatQuantization qb, Q* out, int64_t n,
                                        FloatQuantization qc);

/// Calls M(A, B, Q) for the eight combinations of int8_t and uint8_t (the explicit instantiations).
// clang-format off
#define KILN_QLINEAR_BINARY_TYPES(M)                                    \
  M(int8_t, int8_t, int8_t)   M(int8_t, int8_t, uint8_t)                \
  M(int8_t, uint8_t, int8_t)  M(int8_t, uint8_t, uint8_t)               \
  M(uint8_t, int8_t, int8_t)  M(uint8_t, int8_t, uint8_t)               \
  M(uint8_t, uint8_t, int8_t) M(uint8_t, uint8_t, uint8_t)
// clang-format on

/// qlinearBinaryRun for steps 0 or 1 only, on AVX-512 (cpuSupports(CpuIsa::kAvx512)).
template <typename A, typename B, typename Q>
void qlinearBinaryRunAvx512(QLinearBinaryOp op, const A* a, int64_t stepA, FloatQuantization qa,
                            const B* b, int64_t stepB, FloatQuantization qb, Q* out, int64_t n,
                            FloatQuantization qc);

}  // namespace kiln::cpu
