// What a GEMM does to its result tile before it leaves the cache: add a bias and a residual,
// then apply an activation (backends/cpu/activation.h). Conv, Gemm and MatMul kernels fuse the
// ops that follow them through it.
#pragma once
#include <cstdint>

#include "backends/cpu/activation.h"

namespace kiln::cpu {

/// y = activation(gemm result + bias + residual), element by element. A default-constructed
/// epilogue does nothing.
struct GemmEpilogue {
  /// One value per column of C (length N), or per row (length M) when biasPerRow (Conv's
  /// per-output-channel bias with C = W x columns); nullptr for none.
  const float* bias = nullptr;
  bool biasPerRow = false;
  Activation activation;
  /// An M x N matrix (row stride ldResidual) added before the activation; it must not overlap C
  /// (to add C itself, pass beta = 1 to the GEMM instead).
  const float* residual = nullptr;
  int64_t ldResidual = 0;

  bool empty() const {
    return bias == nullptr && residual == nullptr && activation.kind == ActivationKind::kNone;
  }
};

/// True when applyGemmEpilogue does a block in one pass of its own (bias, residual and no
/// activation, Relu, Clip or LeakyRelu), cheap on a micro-tile; the other activations call
/// activation.h once per row, so GEMM hands them wider blocks.
bool gemmEpilogueIsInline(const GemmEpilogue& ep);

/// Applies ep to the rows x cols block of C at c (row stride ldc) whose first element is
/// C(row0, col0) (for indexing bias and residual).
void applyGemmEpilogue(const GemmEpilogue& ep, float* c, int64_t ldc, int64_t rows, int64_t cols,
                       int64_t row0, int64_t col0);

}  // namespace kiln::cpu
