// FP16-weight MatMul, Gemm and kiln::FusedMatMul (f16w_candidates.h) on the shared candidates of
// packed_linear_candidates.h.
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/kernels/f16w_candidates.h"
#include "backends/cpu/kernels/packed_linear_candidates.h"
#include "ir/precision.h"

namespace kiln::cpu {
namespace {

// Half-precision weights packed for one ISA's sgemm micro-kernel.
struct HalfWeights {
  using Packed = PackedHalfMatrix;
  CpuIsa isa;

  std::string declines(const KernelCreateInfo& info) const {
    const std::string p = ir::nodePrecision(info.node);
    if (p == ir::kPrecisionFp16) return "";
    return "the layer computes in " + (p.empty() ? std::string("its tensors' type") : p) +
           ", not fp16";
  }
  Packed pack(const KernelCreateInfo&, bool transB, int64_t K, int64_t N, const float* b,
              int64_t ldb) const {
    return packBHalf(transB, K, N, b, ldb, isa);
  }
  Packed saved(const KernelCreateInfo& info, const KernelState& state, int64_t K, int64_t N) const {
    // Pairs of halves as floats: the packing's count is even (whole strips of 16 or 32).
    const int64_t values = PackedMatrix::packedFloats(PackedMatrix::Side::kB, isa, K, N);
    const std::shared_ptr<const float> pairs = savedFloats(info.node, state, 0, values / 2);
    return PackedHalfMatrix::view(
        isa, K, N,
        std::shared_ptr<const uint16_t>(pairs, reinterpret_cast<const uint16_t*>(pairs.get())));
  }
  KernelState state(const Packed& b, std::shared_ptr<const void> owner) const {
    KernelState s;
    s.blobs.push_back({b.data(), b.bytes()});
    // The packing's own storage keeps the blob alive when no owner is given.
    s.owner = owner ? std::move(owner) : std::shared_ptr<const void>(b.data(), [b](const void*) {});
    return s;
  }
  uint64_t workspace(const Packed& b, int64_t rows, int threads) const {
    return sgemmWorkspaceBytes(b, rows, threads);
  }
  void multiply(bool transA, int64_t rows, const float* a, int64_t lda, const Packed& b, float* y,
                int64_t ldc, void* workspace, const GemmEpilogue& ep) const {
    sgemmPackedHalf(transA, rows, 1.0f, a, lda, b, 0.0f, y, ldc, workspace, ep);
  }
};

void addFor(KernelRegistry& registry, const char* domain, const std::string& opType,
            const std::string& name) {
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2}) {
    packed_linear::addCandidate(registry, HalfWeights{isa}, domain, opType,
                                "f16w_" + name + "_packed_b_" + cpuIsaName(isa), isa);
  }
}

}  // namespace

void addHalfWeightMatMulCandidates(KernelRegistry& registry, const std::string& opType) {
  addFor(registry, "", opType, opType == "Gemm" ? "gemm" : "matmul");
}

void addHalfWeightFusedMatMulCandidates(KernelRegistry& registry) {
  addFor(registry, "kiln", "FusedMatMul", "fused_matmul");
}

}  // namespace kiln::cpu
