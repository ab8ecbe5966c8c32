// Slices of a grouped NchwcConv and their weight packing (see nchwc_conv_grouped.h).
#include "backends/cpu/kernels/nchwc_conv_grouped.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/aligned_memory.h"
#include "ir/ops/nchwc.h"
#include "ir/ops/nchwc_groups.h"

namespace kiln::cpu {

using ir::kNchwcBlock;

namespace {

// Blocks of one whole slice of `perGroup` channels per group.
int64_t sliceBlocks(const NchwcConvShape& s, int64_t channels) {
  return ir::nchwcBlocks(s.groupsPerSlice * (channels / s.groups));
}

}  // namespace

NchwcConvShape nchwcSliceShape(const NchwcConvShape& s, int64_t k) {
  NchwcConvShape slice = s;
  slice.batch = 1;
  slice.groups = slice.groupsPerSlice = 1;
  const int64_t first = k * s.groupsPerSlice, count = std::min(s.groupsPerSlice, s.groups - first);
  slice.inChannels = count * (s.inChannels / s.groups);
  slice.outChannels = count * (s.outChannels / s.groups);
  return slice;
}

NchwcConvArgs nchwcSliceArgs(const NchwcConvArgs& a, const NchwcConvShape& slice, int64_t n,
                             int64_t k) {
  const NchwcConvShape& s = *a.shape;
  const int64_t inPlane = s.height * s.width, outPlane = s.outHeight * s.outWidth;
  const int64_t inBlocks = sliceBlocks(s, s.inChannels), outBlocks = sliceBlocks(s, s.outChannels);
  const int64_t imageFloats = (s.plainInput ? s.inChannels : s.inBlocks() * kNchwcBlock) * inPlane;
  const int64_t yOffset = (n * s.outBlocks() + k * outBlocks) * outPlane * kNchwcBlock;
  NchwcConvArgs r = a;
  r.shape = &slice;
  r.x = a.x + n * imageFloats + k * inBlocks * kNchwcBlock * inPlane;
  r.weights = a.weights + k * outBlocks * kNchwcBlock * s.taps() * inBlocks * kNchwcBlock;
  r.bias = a.bias + k * outBlocks * kNchwcBlock;
  r.residual = a.residual ? a.residual + yOffset : nullptr;
  r.y = a.y + yOffset;
  return r;
}

int64_t nchwcGroupedWeightFloats(int64_t outChannels, int64_t inChannels, int64_t group,
                                 int64_t kernelH, int64_t kernelW) {
  const ir::NchwcGroupSlices g = ir::nchwcGroupSlices(inChannels, outChannels, group);
  return g.slices * g.outBlocks * g.inBlocks * kNchwcBlock * kNchwcBlock * kernelH * kernelW;
}

NchwcPackedWeights packNchwcGroupedWeights(const float* w, int64_t outChannels, int64_t inChannels,
                                           int64_t group, int64_t kernelH, int64_t kernelW) {
  const ir::NchwcGroupSlices g = ir::nchwcGroupSlices(inChannels, outChannels, group);
  const int64_t taps = kernelH * kernelW;
  NchwcPackedWeights packed;
  packed.floats = nchwcGroupedWeightFloats(outChannels, inChannels, group, kernelH, kernelW);
  packed.data = allocateSharedFloats(packed.floats);
  const int64_t sliceFloats = packed.floats / g.slices;
  for (int64_t k = 0; k < g.slices; ++k) {
    // The slice as a dense [co, ci, kH, kW] convolution: W where co and ci are in the same group.
    const int64_t co = g.outChannels(k), ci = g.inChannels(k);
    std::vector<float> dense(static_cast<size_t>(co * ci * taps), 0.0f);
    for (int64_t o = 0; o < co; ++o) {
      const int64_t inGroup = o / g.outPerGroup;  // the group within the slice
      const float* src = w + (k * g.groupsPerSlice * g.outPerGroup + o) * g.inPerGroup * taps;
      std::copy(src, src + g.inPerGroup * taps,
                dense.begin() + (o * ci + inGroup * g.inPerGroup) * taps);
    }
    const NchwcPackedWeights slice =
        packNchwcWeights(dense.data(), co, ci, kernelH, kernelW, NchwcWeightLayout::kBlockedInput);
    std::memcpy(packed.data.get() + k * sliceFloats, slice.data.get(),
                sizeof(float) * size_t(sliceFloats));
  }
  return packed;
}

}  // namespace kiln::cpu
