// CPU kernels of com.microsoft.nchwc ReorderInput and ReorderOutput (ir/ops/contrib_nchwc.h):
// NCHW or NHWC <-> blocked [N, Cp, H, W] for the block size of this CPU.
#include "backends/cpu/kernels/contrib_nchwc.h"
#include "ir/ops/contrib_nchwc.h"

namespace kiln::cpu {
namespace {

void checkRank4(const KernelContext& ctx, const Tensor& x) {
  if (x.dtype() != DataType::kFloat32 || x.rank() != 4)
    ctx.fail("input 0 (X) must be 4-D float32, got " + x.describe(), ErrorCode::kInvalidArgument);
}

KernelFn makeReorderInput(const KernelCreateInfo& info) {
  const bool channelsLast = ir::attrInt(info.node, "channels_last", 0) != 0;
  const int64_t block = ir::ortNchwcBlockSize();
  return [channelsLast, block](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    checkRank4(ctx, x);
    const int64_t channels = x.dim(channelsLast ? 3 : 1);
    const int64_t pixels = channelsLast ? x.dim(1) * x.dim(2) : x.dim(2) * x.dim(3);
    Tensor& y = ctx.output(0);
    if (y.rank() != 4 || y.dim(1) != ir::roundUpToBlock(channels, block))
      ctx.fail("output " + y.describe() + " is not X " + x.describe() + " blocked by " +
               std::to_string(block));
    if (y.numel() == 0) return;
    blockChannels(x.data<float>(), y.data<float>(), x.dim(0), channels, y.dim(1), pixels, block,
                  channelsLast);
  };
}

KernelFn makeReorderOutput(const KernelCreateInfo& info) {
  const bool channelsLast = ir::attrInt(info.node, "channels_last", 0) != 0;
  const int64_t channels = ir::attrInt(info.node, "channels", 0);
  const int64_t block = ir::ortNchwcBlockSize();
  return [channelsLast, channels, block](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    checkRank4(ctx, x);
    if (x.dim(1) % block != 0 || channels > x.dim(1) || x.dim(1) - channels >= block) {
      ctx.fail("input 0 (X) " + x.describe() + " does not hold " + std::to_string(channels) +
                   " channels in blocks of " + std::to_string(block),
               ErrorCode::kInvalidArgument);
    }
    Tensor& y = ctx.output(0);
    if (y.numel() == 0) return;
    unblockChannels(x.data<float>(), y.data<float>(), x.dim(0), channels, x.dim(1),
                    x.dim(2) * x.dim(3), block, channelsLast);
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft.nchwc", "ReorderInput",
                                KernelFactory(makeReorderInput));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft.nchwc", "ReorderOutput",
                                KernelFactory(makeReorderOutput));

}  // namespace kiln::cpu
