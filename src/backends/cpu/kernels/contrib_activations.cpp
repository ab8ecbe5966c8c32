// CPU kernels of the com.microsoft activations and bias adds (ir/ops/contrib_transformer.cpp),
// float32: Gelu and BiasGelu on the vectorised Gelu of the fused epilogues (activation_row.h),
// BiasAdd on the epilogue's bias-and-residual add, FastGelu and QuickGelu per element.
#include <algorithm>
#include <cmath>

#include "backends/cpu/activation_row.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/gelu_functions.h"

namespace kiln::cpu {
namespace {

// The bias input (1-D, one value per element of x's last dimension), or null when omitted.
const float* rowBias(const KernelContext& ctx, size_t input, int64_t columns) {
  if (!ctx.hasInput(input)) return nullptr;
  const Tensor& b = ctx.input(input);
  if (b.rank() != 1 || b.dim(0) != columns) {
    ctx.fail("input " + std::to_string(input) + " must be 1-D with " + std::to_string(columns) +
                 " values (the last dimension of " + ctx.input(0).describe() + "), got " +
                 b.describe(),
             ErrorCode::kInvalidArgument);
  }
  return b.data<float>();
}

int64_t lastDim(const Tensor& x) { return x.rank() == 0 ? 1 : x.dim(x.rank() - 1); }

// y = act(x + bias + residual) row by row, on the fused epilogue; bias / residual (input index)
// optional.
void biasEpilogue(KernelContext& ctx, ActivationKind act, size_t biasInput, size_t residualInput) {
  const Tensor& x = ctx.input(0);
  const int64_t columns = lastDim(x);
  const float* bias = rowBias(ctx, biasInput, columns);
  const float* residual = nullptr;
  if (ctx.hasInput(residualInput)) {
    const Tensor& r = ctx.input(residualInput);
    if (r.shape() != x.shape()) {
      ctx.fail("skip " + r.describe() + " must have the input's shape " + x.describe(),
               ErrorCode::kInvalidArgument);
    }
    residual = r.data<float>();
  }
  float* y = ctx.output(0).data<float>();
  std::copy(x.data<float>(), x.data<float>() + x.numel(), y);
  const int64_t rows = columns == 0 ? 0 : x.numel() / columns;
  for (int64_t r = 0; r < rows; ++r) {
    applyEpilogueWithBiasRow(Activation{act}, y + r * columns, columns, bias,
                             residual ? residual + r * columns : nullptr);
  }
}

void geluKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  applyActivationInParallel(Activation{ActivationKind::kGelu}, x.data<float>(),
                            ctx.output(0).data<float>(), x.numel());
}

void biasGeluKernel(KernelContext& ctx) { biasEpilogue(ctx, ActivationKind::kGelu, 1, 3); }

void biasAddKernel(KernelContext& ctx) { biasEpilogue(ctx, ActivationKind::kNone, 1, 2); }

void fastGeluKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t columns = lastDim(x);
  const float* bias = rowBias(ctx, 1, columns);
  const float* in = x.data<float>();
  float* out = ctx.output(0).data<float>();
  for (int64_t i = 0; i < x.numel(); ++i)
    out[i] = geluTanh(bias ? in[i] + bias[i % columns] : in[i]);
}

KernelFn makeQuickGeluKernel(const KernelCreateInfo& info) {
  const float alpha = ir::attrFloat(info.node, "alpha", 1.702f);
  return [alpha](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const float* in = x.data<float>();
    float* out = ctx.output(0).data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] / (1.0f + std::exp(-alpha * in[i]));
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "Gelu", KernelFn(geluKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "BiasGelu", KernelFn(biasGeluKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "BiasAdd", KernelFn(biasAddKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "FastGelu", KernelFn(fastGeluKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "QuickGelu", KernelFactory(makeQuickGeluKernel));

}  // namespace kiln::cpu
