// The BF16 candidates of the GEMM-based layers (MatMul, Gemm, kiln::FusedMatMul, Conv,
// kiln::FusedConv): they take a node only when the builder marked it kPrecisionAttr = "bf16"
// (ir/precision.h) and the CPU has AVX512_BF16, keep its constant weights in BF16 packed once
// (gemm/bf16_gemm.h), and are listed first in their families by the files that list the float32
// candidates (matmul.cpp, fused_matmul.cpp, conv_candidates.cpp).
#pragma once
#include <string>

#include "backends/cpu/gemm/bf16_gemm.h"
#include "backends/cpu/kernel_registry.h"

namespace kiln::cpu {

/// Adds bf16_matmul_packed_b_avx512bf16 to MatMul's float32 family, or bf16_gemm_packed_b_...
/// to Gemm's.
void addBf16MatMulCandidate(KernelRegistry& registry, const std::string& opType);
/// Adds bf16_fused_matmul_packed_b_avx512bf16 to kiln::FusedMatMul's float32 family.
void addBf16FusedMatMulCandidate(KernelRegistry& registry);
/// Adds <prefix>_im2col_gemm_avx512bf16 (prefix "bf16_conv", "bf16_fused_conv" or
/// "bf16_ms_fused_conv").
void addBf16ConvCandidate(KernelRegistry& registry, const char* domain, const char* opType,
                          const std::string& prefix, bool fused);

/// "" when the node is marked bf16, else why a BF16 candidate declines it.
std::string bf16PrecisionDeclines(const KernelCreateInfo& info);

/// bf16PrecisionDeclines, then what a BF16 Conv or ConvTranspose by GEMM needs: W a constant
/// float32 (input 1), X float32, group 1.
std::string bf16GemmConvDeclines(const KernelCreateInfo& info);

/// The state of a kernel that keeps one BF16 packing (blob 0; its depth block in params), and
/// the packing back from such a state, checked against the node's sizes.
KernelState bf16PackedState(const PackedBf16Matrix& packed, std::shared_ptr<const void> owner);
PackedBf16Matrix savedBf16Matrix(const KernelCreateInfo& info, const KernelState& state,
                                 PackedBf16Matrix::Side side, int64_t rows, int64_t cols);

}  // namespace kiln::cpu
