// CPU kernels of kiln::ReorderToNchwc and kiln::ReorderFromNchwc: NCHW <-> blocked [N, C/16, H, W,
// 16] (see ir/ops/nchwc.h). Each (image, channel block) pair is an independent task over the thread
// pool.
#include <algorithm>

#include "backends/cpu/kernel.h"
#include "backends/cpu/thread_pool.h"
#include "ir/ops/nchwc.h"

namespace kiln::cpu {
namespace {

using ir::kNchwcBlock;

// Pixels per tile of a transpose: a 64 x 16 tile (4 KiB) stays in L1 while each of its channel
// rows is written or read, so neither side is streamed through more than once.
constexpr int64_t kTilePixels = 64;

// Copies `count` channels of `pixels` pixels between a plain channel-major slice (channel stride
// `pixels`) and a block (pixel stride 16); toBlocked picks the direction. The blocked side's
// padding channels are written as zeros.
void transposeBlock(const float* from, float* to, int64_t count, int64_t pixels, bool toBlocked) {
  for (int64_t p0 = 0; p0 < pixels; p0 += kTilePixels) {
    const int64_t p1 = std::min(pixels, p0 + kTilePixels);
    if (toBlocked) {
      for (int64_t p = p0; p < p1; ++p)
        std::fill(to + p * kNchwcBlock + count, to + (p + 1) * kNchwcBlock, 0.0f);
      for (int64_t c = 0; c < count; ++c) {
        const float* src = from + c * pixels;
        for (int64_t p = p0; p < p1; ++p) to[p * kNchwcBlock + c] = src[p];
      }
    } else {
      for (int64_t c = 0; c < count; ++c) {
        float* dst = to + c * pixels;
        for (int64_t p = p0; p < p1; ++p) dst[p] = from[p * kNchwcBlock + c];
      }
    }
  }
}

void reorder(int64_t batch, int64_t channels, int64_t pixels, bool toBlocked, const float* src,
             float* dst) {
  const int64_t blocks = ir::nchwcBlocks(channels);
  const int64_t tasks = batch * blocks;
  parallelForAtLeast(
      tasks, std::max<int64_t>(1, 16384 / std::max<int64_t>(pixels * kNchwcBlock, 1)),
      [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t n = t / blocks, b = t % blocks;
          const int64_t count = std::min(kNchwcBlock, channels - b * kNchwcBlock);
          const int64_t plainOffset = (n * channels + b * kNchwcBlock) * pixels;
          const int64_t blockedOffset = t * pixels * kNchwcBlock;
          if (toBlocked) {
            transposeBlock(src + plainOffset, dst + blockedOffset, count, pixels, true);
          } else {
            transposeBlock(src + blockedOffset, dst + plainOffset, count, pixels, false);
          }
        }
      });
}

void reorderToNchwcKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DataType::kFloat32 || x.rank() != 4)
    ctx.fail("X must be float32 NCHW, got " + x.describe());
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  reorder(x.dim(0), x.dim(1), x.dim(2) * x.dim(3), true, x.data<float>(), y.data<float>());
}

void reorderFromNchwcKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  if (x.dtype() != DataType::kFloat32 || x.rank() != 5 || x.dim(4) != kNchwcBlock ||
      y.rank() != 4 || x.dim(1) != ir::nchwcBlocks(y.dim(1))) {
    ctx.fail("X " + x.describe() + " is not a blocked tensor of " +
             std::to_string(y.rank() == 4 ? y.dim(1) : -1) + " channels");
  }
  if (y.numel() == 0) return;
  reorder(y.dim(0), y.dim(1), y.dim(2) * y.dim(3), false, x.data<float>(), y.data<float>());
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("kiln", "ReorderToNchwc", KernelFn(reorderToNchwcKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("kiln", "ReorderFromNchwc", KernelFn(reorderFromNchwcKernel));

}  // namespace kiln::cpu
