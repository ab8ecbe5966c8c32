// The integer-GEMM kernels of the quantized products (backends/cpu/qgemm), one entry point per op
// shape: a matrix product with constant 8-bit B (QLinearMatMul, MatMulInteger, and QGemm-like
// ops) and a convolution with constant 8-bit W (QLinearConv, ConvInteger, and QConv-like ops).
// An op is described by where its inputs are and what follows the product, so that another op
// with the same inputs in other places reuses the kernels: register
//   qmatmulCandidate("u8s8_qgemm", isa, signatureOf) / qconvCandidates("u8s8_qconv", signatureOf)
// in its family.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "backends/cpu/activation.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernel_registry.h"

namespace kiln::cpu {

constexpr int kNoInput = -1;

/// Where a quantized product's inputs are (kNoInput: absent) and what follows it. Without
/// yScale the output is int32 (no scales either: MatMulInteger, ConvInteger) or, with the operand
/// scales, float32 = aScale * bScale * alpha * v (QConv / QGemm without y_scale).
struct QProductSignature {
  int a = 0, aScale = kNoInput, aZero = kNoInput;  // activations (A, X)
  int b = 1, bScale = kNoInput, bZero = kNoInput;  // constant weights (B, W)
  int bias = kNoInput;                             // int32, one per output channel
  int yScale = kNoInput, yZero = kNoInput;
  bool transA = false;  // QGemm's transA: declined (A is packed row by row)
  bool transB = false;  // B is N x K (Gemm's transB)
  float alpha = 1.0f;   // QGemm's alpha, folded into the scale
  Activation act;       // Relu or Clip, fused as bounds of the output (others decline)
};

using QSignatureFn = std::function<QProductSignature(const ir::Node&)>;

/// The matrix-product candidate `<prefix>_<isa>` (isa: kAvx512Vnni, kAvxVnni or kAvx2): A of any
/// rank >= 1 ([..., M, K], u8 or s8), B a constant 2-D u8 or s8 matrix (packed when the kernel is
/// made, kept by plans), a_zero_point per tensor or per row of A, b_zero_point and b_scale per
/// tensor or per column, a_scale and y's per tensor.
KernelCandidate qmatmulCandidate(const std::string& prefix, CpuIsa isa, QSignatureFn signature);

/// The convolution candidates, in the order to register them: `<prefix>_nhwc_avx512vnni` (direct,
/// u8 X, symmetric weights, input channels a multiple of 4) and `<prefix>_depthwise_avx512` (one
/// input channel per group, direct), the two that also take channels-last X and Y (kiln::QConv's
/// channels_last = 1); `<prefix>_depthwise_avx2` (one input channel per group, direct),
/// `<prefix>_pointwise_<isa>` (1x1, stride 1, no padding: the GEMM reads X) and
/// `<prefix>_im2col_<isa>` (any other, first layers included), each for AVX512-VNNI, AVX-VNNI and
/// AVX2. W constant u8 or s8, x_zero_point per tensor, w_zero_point and w_scale per tensor or per
/// output channel.
std::vector<KernelCandidate> qconvCandidates(const std::string& prefix, QSignatureFn signature);

}  // namespace kiln::cpu
