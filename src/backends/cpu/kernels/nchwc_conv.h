// Direct convolution in the blocked NCHWc layout (ir/ops/nchwc.h), the CPU kernel of
// kiln::NchwcConv. Weights are packed once, 16 output channels per vector, so that the inner loop
// multiplies one vector of weights by one broadcast input value for each of several output pixels:
//   blocked X: the output blocks are cut into groups of at most kNchwcOutBlocks blocks, sizes as
//              equal as possible (nchwcOutBlockGroup); the group of blocks b0 .. b0+M-1 starts at
//              b0 * taps * ciPadded * 16 floats and is laid out [ci / 16][ky][kx][ci % 16][M][16],
//              where ci runs over ciPadded = 16 * ceil(Ci / 16) input channels (zero weights past
//              Ci): the weights of a slab of whole input blocks are contiguous, so the kernel can
//              stream (and prefetch) them slab after slab (nchwcBlockedWeightOffset).
//   plain X:   [ky][kx][ci][M][16] with ci over the Ci channels only (no padding). The AVX-512
//              kernel reads X [N, Ci, H, W] where it lies; the AVX2 one copies it into
//              [N, Hp, Wp, Ci] with its padding, whose (kx, ci) values for one kernel row are
//              contiguous like these weights.
//   depthwise: [channel block][ky][kx][16].
//   grouped:   each slice's weights packed for a blocked X as above, as a dense convolution of
//              the slice's channels (zero between its groups), slice after slice
//              (nchwc_conv_grouped.h).
// Output channels past Co get zero weights and zero bias, so Y's padding channels stay finite.
#pragma once
#include <cstdint>
#include <memory>

#include "backends/cpu/activation.h"
#include "backends/cpu/cpu_isa.h"
#include "core/internal_api.h"

namespace kiln::cpu {

/// Output-channel blocks whose weights are packed together (the register block of the AVX-512
/// kernel).
constexpr int64_t kNchwcOutBlocks = 4;

/// Where, in a group of M blocks packed for a blocked X, the weights of input channels
/// c0 .. c0 + 15 (c0 a multiple of 16) for tap `tap` start, in floats.
constexpr int64_t nchwcBlockedWeightOffset(int64_t taps, int64_t tap, int64_t c0, int64_t M) {
  return (c0 * taps + tap * 16) * M * 16;
}

/// The output blocks [begin, end) of group g of the weight packing for `outBlocks` blocks.
struct NchwcBlockRange {
  int64_t begin = 0, end = 0;
};
int64_t nchwcOutBlockGroups(int64_t outBlocks);
NchwcBlockRange nchwcOutBlockGroup(int64_t outBlocks, int64_t g);

enum class NchwcWeightLayout { kBlockedInput, kPlainInput, kDepthwise };

/// The sizes of one NchwcConv call.
struct NchwcConvShape {
  int64_t batch = 0;
  int64_t inChannels = 0, outChannels = 0;  // logical Ci and Co (depthwise: equal)
  int64_t height = 0, width = 0;            // input spatial size
  int64_t outHeight = 0, outWidth = 0;
  int64_t kernelH = 0, kernelW = 0;
  int64_t strideH = 1, strideW = 1;
  int64_t dilationH = 1, dilationW = 1;
  int64_t padTop = 0, padLeft = 0;
  bool plainInput = false;  // X is NCHW [N, Ci, H, W] instead of blocked
  bool depthwise = false;   // group == Ci == Co
  // A grouped convolution (not depthwise, blocked X): `groups` groups of Ci / groups -> Co / groups
  // channels, run groupsPerSlice to a slice (nchwc_conv_grouped.h, ir/ops/nchwc_groups.h).
  int64_t groups = 1, groupsPerSlice = 1;

  int64_t inBlocks() const { return (inChannels + 15) / 16; }
  int64_t outBlocks() const { return (outChannels + 15) / 16; }
  int64_t taps() const { return kernelH * kernelW; }
  /// The independent block slices of the convolution: 1 unless grouped.
  int64_t slices() const { return (groups + groupsPerSlice - 1) / groupsPerSlice; }
  /// 1x1, stride 1, no padding, blocked X: output pixel q reads input pixel q.
  bool pointwise() const {
    return !plainInput && !depthwise && kernelH == 1 && kernelW == 1 && strideH == 1 &&
           strideW == 1 && padTop == 0 && padLeft == 0 && outHeight == height && outWidth == width;
  }
};

/// Weights packed as described above, 64-byte aligned.
struct NchwcPackedWeights {
  std::shared_ptr<float> data;
  int64_t floats = 0;
};

/// Packs W [Co, Ci / group, kH, kW] (Ci / group == 1 for kDepthwise) for X of the given layout.
KILN_INTERNAL_API NchwcPackedWeights packNchwcWeights(const float* w, int64_t outChannels,
                                                      int64_t inChannels, int64_t kernelH,
                                                      int64_t kernelW, NchwcWeightLayout layout);

/// One convolution: y = act(conv(x, weights) + bias + residual), all blocked as in nchwc.h.
struct NchwcConvArgs {
  const NchwcConvShape* shape = nullptr;
  const float* x = nullptr;
  const float* weights = nullptr;   // packed for this X (plainInput or not)
  const float* bias = nullptr;      // outBlocks * 16 floats (zero past Co); never null
  const float* residual = nullptr;  // shaped like y, or null
  Activation act;
  float* y = nullptr;
  /// Scratch memory of nchwcConvScratchFloats(shape, isa) floats, 64-byte aligned (a kernel's
  /// planned workspace); null: the call allocates its own.
  float* scratch = nullptr;
};

/// Floats of scratch memory nchwcConv needs for this shape on `isa`: the padded copy of a plain
/// X that the AVX2 kernel reads (the AVX-512 one reads X in place); 0 for a blocked X.
int64_t nchwcConvScratchFloats(const NchwcConvShape& shape, CpuIsa isa);

/// Runs the convolution over the current thread pool with the AVX-512 or the AVX2 kernel as
/// `isa` says (the candidate chosen for the node; the CPU must have it).
KILN_INTERNAL_API void nchwcConv(const NchwcConvArgs& args, CpuIsa isa = activeCpuIsa());

namespace detail {
/// The AVX-512 and AVX2 implementations; call nchwcConv instead.
void nchwcConvAvx512(const NchwcConvArgs& args);
void nchwcDepthwiseAvx512(const NchwcConvArgs& args);  // called by nchwcConvAvx512
void nchwcConvAvx2(const NchwcConvArgs& args);
}  // namespace detail

}  // namespace kiln::cpu
