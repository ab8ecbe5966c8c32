// BF16 MatMul, Gemm and kiln::FusedMatMul on a constant 2-D float32 B (a Linear layer's weights)
// packed once in BF16; A rounded to BF16 as it is packed, the products summed in FP32, bias,
// residual and activation applied in FP32 (bf16_candidates.h, packed_linear_candidates.h).
#include <cstring>

#include "backends/cpu/kernels/bf16_candidates.h"
#include "backends/cpu/kernels/packed_linear_candidates.h"
#include "ir/precision.h"

namespace kiln::cpu {
namespace {

using Side = PackedBf16Matrix::Side;

// The BF16 weights of packed_linear_candidates.h.
struct Bf16Weights {
  using Packed = PackedBf16Matrix;
  std::string declines(const KernelCreateInfo& info) const { return bf16PrecisionDeclines(info); }
  Packed pack(const KernelCreateInfo&, bool transB, int64_t K, int64_t N, const float* b,
              int64_t ldb) const {
    return packBf16B(transB, K, N, b, ldb);
  }
  Packed saved(const KernelCreateInfo& info, const KernelState& state, int64_t K, int64_t N) const {
    return savedBf16Matrix(info, state, Side::kB, K, N);
  }
  KernelState state(const Packed& b, std::shared_ptr<const void> owner) const {
    return bf16PackedState(b, std::move(owner));
  }
  uint64_t workspace(const Packed& b, int64_t rows, int) const {
    return bf16GemmWorkspaceBytes(b, rows);
  }
  void multiply(bool transA, int64_t rows, const float* a, int64_t lda, const Packed& b, float* y,
                int64_t ldc, void* workspace, const GemmEpilogue& ep) const {
    bf16GemmPacked(transA, rows, a, lda, b, 0.0f, y, ldc, workspace, ep);
  }
};

}  // namespace

std::string bf16PrecisionDeclines(const KernelCreateInfo& info) {
  const std::string p = ir::nodePrecision(info.node);
  if (p == ir::kPrecisionBf16) return "";
  return "the layer computes in " + (p.empty() ? std::string("its tensors' type") : p) +
         ", not bf16";
}

KernelState bf16PackedState(const PackedBf16Matrix& packed, std::shared_ptr<const void> owner) {
  KernelState state;
  const int64_t kc = packed.depthBlock();
  state.params.resize(sizeof(kc));
  std::memcpy(state.params.data(), &kc, sizeof(kc));
  state.blobs.push_back({packed.data(), packed.bytes()});
  // The packing's own storage keeps the blob alive when no owner is given.
  state.owner = owner ? std::move(owner)
                      : std::shared_ptr<const void>(packed.data(), [packed](const void*) {});
  return state;
}

PackedBf16Matrix savedBf16Matrix(const KernelCreateInfo& info, const KernelState& state,
                                 PackedBf16Matrix::Side side, int64_t rows, int64_t cols) {
  int64_t kc = 0;
  if (state.params.size() != sizeof(kc)) {
    throw Error(ErrorCode::kInvalidPlan,
                "layer '" + info.node.name + "': the BF16 kernel's state has " +
                    std::to_string(state.params.size()) + " parameter bytes, not 8");
  }
  std::memcpy(&kc, state.params.data(), sizeof(kc));
  if (kc < 2 || kc % 2 != 0 || kc > (int64_t{1} << 20)) {
    throw Error(ErrorCode::kInvalidPlan, "layer '" + info.node.name + "': BF16 depth block " +
                                             std::to_string(kc) + " is not a positive even size");
  }
  const std::shared_ptr<const float> words =
      savedFloats(info.node, state, 0,
                  PackedBf16Matrix::packedWords(side, rows, cols));  // 32-bit words as floats
  return PackedBf16Matrix::view(
      side, rows, cols, kc,
      std::shared_ptr<const uint32_t>(words, reinterpret_cast<const uint32_t*>(words.get())));
}

void addBf16MatMulCandidate(KernelRegistry& registry, const std::string& opType) {
  const std::string id =
      opType == "Gemm" ? "bf16_gemm_packed_b_avx512bf16" : "bf16_matmul_packed_b_avx512bf16";
  packed_linear::addCandidate(registry, Bf16Weights{}, "", opType, id, CpuIsa::kAvx512Bf16);
}

void addBf16FusedMatMulCandidate(KernelRegistry& registry) {
  packed_linear::addCandidate(registry, Bf16Weights{}, "kiln", "FusedMatMul",
                              "bf16_fused_matmul_packed_b_avx512bf16", CpuIsa::kAvx512Bf16);
}

}  // namespace kiln::cpu
