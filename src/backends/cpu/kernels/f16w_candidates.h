// The FP16-weight candidates of the Linear layers (MatMul, Gemm, kiln::FusedMatMul on a constant
// 2-D float32 B): for layers the builder marked kPrecisionAttr = "fp16" (BuilderFlag::kFP16,
// ir/precision.h) the weights are kept in half precision, packed once (gemm/sgemm.h:
// PackedHalfMatrix), and widened back to float32 as the products read them; A, the sums and the
// epilogue stay float32. Listed after the BF16 candidates and before the float32 ones by the files
// that list those (matmul.cpp, fused_matmul.cpp).
#pragma once
#include <string>

#include "backends/cpu/kernel_registry.h"

namespace kiln::cpu {

/// Adds f16w_{matmul,gemm}_packed_b_{avx512,avx2} to MatMul's or Gemm's float32 family.
void addHalfWeightMatMulCandidates(KernelRegistry& registry, const std::string& opType);
/// Adds f16w_fused_matmul_packed_b_{avx512,avx2} to kiln::FusedMatMul's float32 family.
void addHalfWeightFusedMatMulCandidates(KernelRegistry& registry);

}  // namespace kiln::cpu
