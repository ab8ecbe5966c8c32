// How a grouped convolution (group > 1, not depthwise) runs in the blocked layout (nchwc.h): as
// independent convolutions ("slices") over whole channel blocks. A group of 16, 32, 48 ...
// channels is a slice of its own; groups of 8 or 4 channels go two or four to a slice, so that
// each slice starts on a block boundary, with zero weights between them (two or four times the
// multiplications of that slice, but the blocked kernel's full vectors: ResNeXt-50's 4-channel
// groups run faster so than plain, and need no reorders; docs/performance.md). The layout pass
// (src/opt) and the NchwcConv kernel (backends/cpu/kernels/nchwc_conv_grouped.h) both decide
// from this.
#pragma once
#include <cstdint>
#include <string>
#include "core/internal_api.h"

namespace kiln::ir {

/// The fewest channels per group that run blocked: below 4, zero weights would be most of the work.
constexpr int64_t kMinNchwcGroupChannels = 4;

struct NchwcGroupSlices {
  int64_t slices = 0;          // 0: the convolution does not split into block slices
  int64_t groups = 0;          // the model's
  int64_t groupsPerSlice = 1;  // of them merged into one slice (1, 2 or 4)
  int64_t inPerGroup = 0, outPerGroup = 0;
  int64_t inBlocks = 0, outBlocks = 0;  // per slice; slice s reads input blocks [s * inBlocks, ...)
  std::string whyNot;                   // when slices == 0

  /// The real input / output channels of slice s: fewer than a whole slice's in a last slice
  /// that holds fewer groups (13 groups of 8: the 7th slice has one).
  int64_t inChannels(int64_t s) const { return channelsOf(s, inPerGroup); }
  int64_t outChannels(int64_t s) const { return channelsOf(s, outPerGroup); }

 private:
  int64_t channelsOf(int64_t s, int64_t perGroup) const {
    const int64_t first = s * groupsPerSlice;
    return (first + groupsPerSlice <= groups ? groupsPerSlice : groups - first) * perGroup;
  }
};

/// The slices of a convolution of `inChannels` -> `outChannels` channels in `group` groups
/// (group > 1, not depthwise), or slices == 0 with the reason.
KILN_INTERNAL_API NchwcGroupSlices nchwcGroupSlices(int64_t inChannels, int64_t outChannels,
                                                    int64_t group);

}  // namespace kiln::ir
