#include "backends/cpu/gemm/gemm_epilogue.h"

namespace kiln::cpu {

void applyGemmEpilogue(const GemmEpilogue& ep, float* c, int64_t ldc, int64_t rows, int64_t cols, int64_t row0,
                       int64_t col0) {
  if (ep.empty() || rows <= 0 || cols <= 0) return;
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
