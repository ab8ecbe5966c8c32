// kiln::FusedMatMul: Y = act(A @ B + bias + Z) for float32 A [..., K] and a 2-D B [K, N] (a
// Linear layer). The stacked rows of A are one GEMM, with B packed once when it is constant and
// the epilogue applied to each output tile while it is in cache.
#include "backends/cpu/activation.h"
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/kernel.h"

namespace kiln::cpu {
namespace {

KernelFn makeFusedMatMulKernel(const KernelCreateInfo& info) {
  const Activation act = fusedActivationOf(info.node);
  PackedMatrix packed;
  const Tensor* constantB = info.constants.size() > 1 ? info.constants[1] : nullptr;
  if (constantB && constantB->dtype() == DataType::kFloat32 && constantB->rank() == 2) {
    packed = packB(false, constantB->dim(0), constantB->dim(1), constantB->data<float>(), constantB->dim(1));
    info.keepsOwnCopyOf(1);  // float32 A is required, so B is only read packed
  }
  return [act, packed](KernelContext& ctx) {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Tensor* bias = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
    const Tensor* residual = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
    if (a.dtype() != DataType::kFloat32 || b.dtype() != DataType::kFloat32 || b.rank() != 2 || a.rank() < 1) {
      ctx.fail("FusedMatMul needs float32 A and a 2-D float32 B, got A " + a.describe() + " and B " + b.describe(),
               ErrorCode::kInvalidArgument);
    }
    const int64_t K = b.dim(0), N = b.dim(1);
    if (a.dim(a.rank() - 1) != K) {
      ctx.fail("inner dimensions differ: A " + a.describe() + ", B " + b.describe(), ErrorCode::kInvalidArgument);
    }
    if (bias && (bias->dtype() != DataType::kFloat32 || bias->numel() != N)) {
      ctx.fail("bias " + bias->describe() + " must be float32 with " + std::to_string(N) + " values",
               ErrorCode::kInvalidArgument);
    }
    Tensor& y = ctx.output(0);
    if (residual && (residual->dtype() != DataType::kFloat32 || residual->shape() != y.shape())) {
      ctx.fail("residual Z " + residual->describe() + " must be float32 shaped like the output " + y.describe(),
               ErrorCode::kInvalidArgument);
    }
    const int64_t rows = K ? a.numel() / K : (N ? y.numel() / N : 0);
    if (y.numel() == 0) return;
    const GemmEpilogue ep{bias ? bias->data<float>() : nullptr, false, act, residual ? residual->data<float>() : nullptr, N};
    if (!packed.empty() && packed.rows() == K && packed.cols() == N) {
      sgemmPacked(false, rows, 1.0f, a.data<float>(), K, packed, 0.0f, y.data<float>(), N, ep);
    } else {
      sgemm(false, false, rows, N, K, 1.0f, a.data<float>(), K, b.data<float>(), N, 0.0f, y.data<float>(), N, ep);
    }
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("kiln", "FusedMatMul", KernelFactory(makeFusedMatMulKernel));

}  // namespace kiln::cpu
