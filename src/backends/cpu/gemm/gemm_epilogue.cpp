#include "backends/cpu/gemm/gemm_epilogue.h"

#include <immintrin.h>

namespace kiln::cpu {
namespace {

// The piecewise-linear activations on 8 floats, with the same NaN behaviour as activation.h's
// (max_ps/min_ps return the second operand when either is NaN, as `a > b ? a : b` does).
template <ActivationKind K>
inline __m256 activate8(__m256 v, __m256 alpha, __m256 beta) {
  if constexpr (K == ActivationKind::kRelu)
    return _mm256_max_ps(v, _mm256_setzero_ps());
  else if constexpr (K == ActivationKind::kClip)
    return _mm256_min_ps(_mm256_max_ps(v, alpha), beta);
  else if constexpr (K == ActivationKind::kLeakyRelu)
    return _mm256_blendv_ps(v, _mm256_mul_ps(v, alpha),
                            _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ));
  else
    return v;
}

template <ActivationKind K>
inline float activate1(float v, const Activation& a) {
  if constexpr (K == ActivationKind::kRelu)
    return v > 0.0f ? v : 0.0f;
  else if constexpr (K == ActivationKind::kClip) {
    const float low = v > a.alpha ? v : a.alpha;
    return low < a.beta ? low : a.beta;
  } else if constexpr (K == ActivationKind::kLeakyRelu)
    return v < 0.0f ? v * a.alpha : v;
  else
    return v;
}

// The whole tile in one pass, for the activations that are a few instructions: on a 14 x 32
// micro-tile, a call into activation.cpp per row would cost more than the arithmetic.
template <ActivationKind K>
void tileEpilogue(const GemmEpilogue& ep, float* c, int64_t ldc, int64_t rows, int64_t cols,
                  int64_t row0, int64_t col0) {
  const __m256 alpha = _mm256_set1_ps(ep.activation.alpha),
               beta = _mm256_set1_ps(ep.activation.beta);
  const float* colBias = ep.bias && !ep.biasPerRow ? ep.bias + col0 : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = c + r * ldc;
    const float* residual = ep.residual ? ep.residual + (row0 + r) * ep.ldResidual + col0 : nullptr;
    const float rowBias = ep.bias && ep.biasPerRow ? ep.bias[row0 + r] : 0.0f;
    const bool addRowBias = rowBias != 0.0f;  // adding +0 would turn -0 results into +0
    const __m256 rowBias8 = _mm256_set1_ps(rowBias);
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8) {
      __m256 v = _mm256_loadu_ps(row + j);
      if (colBias) v = _mm256_add_ps(v, _mm256_loadu_ps(colBias + j));
      if (addRowBias) v = _mm256_add_ps(v, rowBias8);
      if (residual) v = _mm256_add_ps(v, _mm256_loadu_ps(residual + j));
      _mm256_storeu_ps(row + j, activate8<K>(v, alpha, beta));
    }
    for (; j < cols; ++j) {
      float v = row[j];
      if (colBias) v += colBias[j];
      if (addRowBias) v += rowBias;
      if (residual) v += residual[j];
      row[j] = activate1<K>(v, ep.activation);
    }
  }
}

}  // namespace

bool gemmEpilogueIsInline(const GemmEpilogue& ep) {
  switch (ep.activation.kind) {
    case ActivationKind::kNone:
    case ActivationKind::kRelu:
    case ActivationKind::kClip:
    case ActivationKind::kLeakyRelu:
      return true;
    default:
      return false;
  }
}

void applyGemmEpilogue(const GemmEpilogue& ep, float* c, int64_t ldc, int64_t rows, int64_t cols,
                       int64_t row0, int64_t col0) {
  if (ep.empty() || rows <= 0 || cols <= 0) return;
  switch (ep.activation.kind) {
    case ActivationKind::kNone:
      return tileEpilogue<ActivationKind::kNone>(ep, c, ldc, rows, cols, row0, col0);
    case ActivationKind::kRelu:
      return tileEpilogue<ActivationKind::kRelu>(ep, c, ldc, rows, cols, row0, col0);
    case ActivationKind::kClip:
      return tileEpilogue<ActivationKind::kClip>(ep, c, ldc, rows, cols, row0, col0);
    case ActivationKind::kLeakyRelu:
      return tileEpilogue<ActivationKind::kLeakyRelu>(ep, c, ldc, rows, cols, row0, col0);
    default:
      break;
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* row = c + r * ldc;
    const float* residual = ep.residual ? ep.residual + (row0 + r) * ep.ldResidual + col0 : nullptr;
    if (ep.bias && !ep.biasPerRow) {
      applyEpilogueWithBiasRow(ep.activation, row, cols, ep.bias + col0, residual);
    } else {
      applyEpilogue(ep.activation, row, cols, ep.bias ? ep.bias[row0 + r] : 0.0f, residual);
    }
  }
}

}  // namespace kiln::cpu
