// NchwcConv's X scale folded into its packed weights (nchwc_conv_scale.h).
#include "backends/cpu/kernels/nchwc_conv_scale.h"

#include <algorithm>
#include <string>

#include "backends/cpu/thread_pool.h"
#include "core/aligned_memory.h"
#include "ir/ops/nchwc.h"

namespace kiln::cpu {

using ir::kNchwcBlock;

void scaleNchwcBlockedWeights(const NchwcConvShape& s, const float* packed, const float* scale,
                              float* out) {
  const int64_t taps = s.taps(), inBlocks = s.inBlocks(), outBlocks = s.outBlocks();
  const int64_t groups = nchwcOutBlockGroups(outBlocks);
  const int64_t blockFloats =
      taps * inBlocks * kNchwcBlock * kNchwcBlock;  // one output block's weights
  // Tasks: (group, input block), each taps * 16 rows of M * 16 weights (nchwcBlockedWeightOffset).
  const int64_t floatsPerTask = taps * kNchwcBlock * kNchwcOutBlocks * kNchwcBlock;
  parallelForAtLeast(
      groups * inBlocks, std::max<int64_t>(1, kMinElementsPerThread / floatsPerTask),
      [&](int64_t t0, int64_t t1) {
        for (int64_t task = t0; task < t1; ++task) {
          const int64_t g = task / inBlocks, cb = task % inBlocks;
          const NchwcBlockRange r = nchwcOutBlockGroup(outBlocks, g);
          const int64_t m = r.end - r.begin, rowFloats = m * kNchwcBlock;
          const int64_t lanes = std::min(kNchwcBlock, s.inChannels - cb * kNchwcBlock);
          const int64_t begin =
              r.begin * blockFloats + nchwcBlockedWeightOffset(taps, 0, cb * kNchwcBlock, m);
          for (int64_t tap = 0; tap < taps; ++tap) {
            const float* src = packed + begin + tap * kNchwcBlock * rowFloats;
            float* dst = out + begin + tap * kNchwcBlock * rowFloats;
            for (int64_t lane = 0; lane < lanes; ++lane) {
              const float k = scale[cb * kNchwcBlock + lane];
              for (int64_t j = 0; j < rowFloats; ++j)
                dst[lane * rowFloats + j] = src[lane * rowFloats + j] * k;
            }
            // Padding channels: zero weights, kept zero even where the scale's padding lanes are
            // not finite.
            std::fill(dst + lanes * rowFloats, dst + kNchwcBlock * rowFloats, 0.0f);
          }
        }
      });
}

void nchwcConvScaledInput(const NchwcConvArgs& args, const float* scale, int64_t scaleImageStride,
                          CpuIsa isa) {
  const NchwcConvShape& s = *args.shape;
  const int64_t floats = s.outBlocks() * kNchwcBlock * s.taps() * s.inBlocks() * kNchwcBlock;
  ScratchFloats own;  // when the caller has no workspace
  float* scaled = args.scratch ? args.scratch : own.get(floats);
  NchwcConvShape image = s;
  image.batch = 1;
  const int64_t xImage = s.inBlocks() * s.height * s.width * kNchwcBlock;
  const int64_t yImage = s.outBlocks() * s.outHeight * s.outWidth * kNchwcBlock;
  for (int64_t n = 0; n < s.batch; ++n) {
    if (n == 0 || scaleImageStride != 0) {
      scaleNchwcBlockedWeights(s, args.weights, scale + n * scaleImageStride, scaled);
    }
    NchwcConvArgs a = args;
    a.shape = &image;
    a.x = args.x + n * xImage;
    a.weights = scaled;
    a.scratch = nullptr;  // a blocked X needs none
    a.residual = args.residual ? args.residual + n * yImage : nullptr;
    a.y = args.y + n * yImage;
    nchwcConv(a, isa);
  }
}

void runNchwcConvWithInputScale(KernelContext& ctx, NchwcConvArgs& args, const Tensor& scale,
                                CpuIsa isa) {
  const NchwcConvShape& s = *args.shape;
  if (s.plainInput || s.depthwise || !args.weights) {
    ctx.fail("the X scale S needs a blocked X, group 1 and direct (not Winograd) weights",
             ErrorCode::kInvalidArgument);
  }
  const bool perImage = scale.rank() == 5 && scale.dim(0) == s.batch;
  if (scale.dtype() != DataType::kFloat32 || scale.rank() != 5 ||
      !(perImage || scale.dim(0) == 1) || scale.dim(1) != s.inBlocks() || scale.dim(2) != 1 ||
      scale.dim(3) != 1 || scale.dim(4) != kNchwcBlock) {
    ctx.fail("X scale S " + scale.describe() + " must be float32 [" + std::to_string(s.batch) +
                 " or 1, " + std::to_string(s.inBlocks()) +
                 ", 1, 1, 16], one value per input channel",
             ErrorCode::kInvalidArgument);
  }
  const int64_t floats = s.outBlocks() * kNchwcBlock * s.taps() * s.inBlocks() * kNchwcBlock;
  args.scratch = static_cast<float*>(ctx.workspace(static_cast<uint64_t>(floats) * sizeof(float)));
  nchwcConvScaledInput(args, scale.data<float>(),
                       perImage && s.batch > 1 ? s.inBlocks() * kNchwcBlock : 0, isa);
}

}  // namespace kiln::cpu
