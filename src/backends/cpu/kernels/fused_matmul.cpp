// kiln::FusedMatMul: Y = act(A @ B + bias + Z) for float32 A [..., K] and a 2-D B [K, N] (a
// Linear layer). The stacked rows of A are one GEMM, the epilogue applied to each output tile
// while it is in cache. Candidates, in order: bf16_fused_matmul_packed_b_avx512bf16 (layers marked
// bf16, bf16_candidates.h), f16w_fused_matmul_packed_b_{avx512,avx2} (layers marked fp16: weights
// in half precision, f16w_candidates.h), f32_fused_matmul_packed_b_{avx512,avx2} (a constant
// B packed once, for that ISA's sgemm micro-kernel), then f32_fused_matmul_sgemm_{avx512,avx2}.
#include "backends/cpu/activation.h"
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/bf16_candidates.h"
#include "backends/cpu/kernels/f16w_candidates.h"

namespace kiln::cpu {
namespace {

std::string packedBDeclines(const KernelCreateInfo& info) {
  const Tensor* b = info.constants.size() > 1 ? info.constants[1] : nullptr;
  if (!b) return "B is not a constant";
  if (b->dtype() != DataType::kFloat32 || b->rank() != 2)
    return "B " + b->describe() + " is not a 2-D float32 matrix";
  return "";
}

// Scratch of the GEMM of A (rows x K, the rows stacked) and B (K x N), against `packed` when it
// holds B.
uint64_t fusedMatMulWorkspaceBytes(const PackedMatrix& packed, int64_t rows, int64_t N, int64_t K,
                                   int threads) {
  if (!packed.empty() && packed.rows() == K && packed.cols() == N)
    return sgemmWorkspaceBytes(packed, rows, threads);
  return sgemmWorkspaceBytes(rows, N, K, threads);
}

// With packConstantB, B packed for `isa`'s micro-kernel, or (with `saved`) the packing a plan
// holds.
Kernel makeFusedMatMulKernel(const KernelCreateInfo& info, bool packConstantB, CpuIsa isa,
                             const KernelState* saved) {
  const Activation act = fusedActivationOf(info.node);
  PackedMatrix packed;
  const Tensor* constantB = info.constants.size() > 1 ? info.constants[1] : nullptr;
  if (packConstantB) {
    const int64_t K = constantB->dim(0), N = constantB->dim(1);
    using Side = PackedMatrix::Side;
    packed = saved
                 ? PackedMatrix::view(Side::kB, isa, K, N,
                                      savedFloats(info.node, *saved, 0,
                                                  PackedMatrix::packedFloats(Side::kB, isa, K, N)))
                 : packB(false, K, N, constantB->data<float>(), N, isa);
    info.keepsOwnCopyOf(1);  // float32 A is required, so B is only read packed
  }
  std::function<KernelState()> save;
  if (!packed.empty()) {
    save = [packed] {
      return KernelState{{},
                         {{packed.data(), static_cast<uint64_t>(packed.floats()) * sizeof(float)}},
                         std::shared_ptr<const void>(packed.data(), [](const void*) {})};
    };
  }
  return {[act, packed](KernelContext& ctx) {
            const Tensor& a = ctx.input(0);
            const Tensor& b = ctx.input(1);
            const Tensor* bias = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
            const Tensor* residual = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
            if (a.dtype() != DataType::kFloat32 || b.dtype() != DataType::kFloat32 ||
                b.rank() != 2 || a.rank() < 1) {
              ctx.fail("FusedMatMul needs float32 A and a 2-D float32 B, got A " + a.describe() +
                           " and B " + b.describe(),
                       ErrorCode::kInvalidArgument);
            }
            const int64_t K = b.dim(0), N = b.dim(1);
            if (a.dim(a.rank() - 1) != K) {
              ctx.fail("inner dimensions differ: A " + a.describe() + ", B " + b.describe(),
                       ErrorCode::kInvalidArgument);
            }
            if (bias && (bias->dtype() != DataType::kFloat32 || bias->numel() != N)) {
              ctx.fail("bias " + bias->describe() + " must be float32 with " + std::to_string(N) +
                           " values",
                       ErrorCode::kInvalidArgument);
            }
            Tensor& y = ctx.output(0);
            if (residual &&
                (residual->dtype() != DataType::kFloat32 || residual->shape() != y.shape())) {
              ctx.fail("residual Z " + residual->describe() +
                           " must be float32 shaped like the output " + y.describe(),
                       ErrorCode::kInvalidArgument);
            }
            const int64_t rows = K ? a.numel() / K : (N ? y.numel() / N : 0);
            if (y.numel() == 0) return;
            const GemmEpilogue ep{bias ? bias->data<float>() : nullptr, false, act,
                                  residual ? residual->data<float>() : nullptr, N};
            void* ws = ctx.workspace(fusedMatMulWorkspaceBytes(packed, rows, N, K, poolThreads()));
            if (!packed.empty() && packed.rows() == K && packed.cols() == N) {
              sgemmPacked(false, rows, 1.0f, a.data<float>(), K, packed, 0.0f, y.data<float>(), N,
                          ws, ep);
            } else {
              sgemm(false, false, rows, N, K, 1.0f, a.data<float>(), K, b.data<float>(), N, 0.0f,
                    y.data<float>(), N, ws, ep);
            }
          },
          [packed](const std::vector<const Shape*>& in, int threads) -> uint64_t {
            if (in.size() < 2 || !in[0] || !in[1] || in[0]->empty() || in[1]->size() != 2) return 0;
            const int64_t K = (*in[1])[0], N = (*in[1])[1];
            const int64_t rows = K ? shapeNumel(*in[0]) / K : 0;
            return fusedMatMulWorkspaceBytes(packed, rows, N, K, threads);
          },
          std::move(save)};
}

const bool kRegistered = [] {
  addBf16FusedMatMulCandidate(KernelRegistry::global());
  addHalfWeightFusedMatMulCandidates(KernelRegistry::global());
  for (bool packed : {true, false}) {
    for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2}) {
      KernelCandidate c;
      c.id = std::string("f32_fused_matmul_") + (packed ? "packed_b_" : "sgemm_") + cpuIsaName(isa);
      c.isa = isa;
      if (packed) c.supports = packedBDeclines;
      c.create = [packed, isa](const KernelCreateInfo& info) {
        return makeFusedMatMulKernel(info, packed, isa, nullptr);
      };
      if (packed) {
        c.restore = [isa](const KernelCreateInfo& info, const KernelState& s) {
          return makeFusedMatMulKernel(info, true, isa, &s);
        };
      }
      KernelRegistry::global().addCandidate("kiln", "FusedMatMul", DataType::kFloat32,
                                            std::move(c));
    }
  }
  return true;
}();

}  // namespace

}  // namespace kiln::cpu
