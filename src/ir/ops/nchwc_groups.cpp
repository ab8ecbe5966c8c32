// The block slices of a grouped NchwcConv (see nchwc_groups.h).
#include "ir/ops/nchwc_groups.h"

#include <algorithm>

#include "ir/ops/nchwc.h"

namespace kiln::ir {

namespace {

// How many groups of `perGroup` channels make whole blocks: 1 for multiples of 16, 2 for 8, 4
// for 4; 0 otherwise.
int64_t groupsPerBlockMultiple(int64_t perGroup) {
  if (perGroup % kNchwcBlock == 0) return 1;
  if (perGroup >= kMinNchwcGroupChannels && kNchwcBlock % perGroup == 0)
    return kNchwcBlock / perGroup;
  return 0;
}

}  // namespace

NchwcGroupSlices nchwcGroupSlices(int64_t inChannels, int64_t outChannels, int64_t group) {
  NchwcGroupSlices r;
  const std::string sizes = std::to_string(inChannels) + " -> " + std::to_string(outChannels) +
                            " channels in " + std::to_string(group) + " groups";
  if (group <= 1 || inChannels % group != 0 || outChannels % group != 0) {
    r.whyNot = sizes + ": not a grouped convolution";
    return r;
  }
  r.groups = group;
  r.inPerGroup = inChannels / group;
  r.outPerGroup = outChannels / group;
  const int64_t in = groupsPerBlockMultiple(r.inPerGroup),
                out = groupsPerBlockMultiple(r.outPerGroup);
  if (in == 0 || out == 0) {
    r.whyNot = sizes + ": takes 4, 8 or a multiple of 16 channels per group";
    return r;
  }
  r.groupsPerSlice = std::max(in, out);
  r.inBlocks = r.inPerGroup * r.groupsPerSlice / kNchwcBlock;
  r.outBlocks = r.outPerGroup * r.groupsPerSlice / kNchwcBlock;
  const int64_t slices = (group + r.groupsPerSlice - 1) / r.groupsPerSlice;
  // A last slice of fewer groups must still fill the tensor's last blocks exactly.
  if (nchwcBlocks(inChannels) != slices * r.inBlocks ||
      nchwcBlocks(outChannels) != slices * r.outBlocks) {
    r.whyNot = sizes + ": the last slice of " + std::to_string(r.groupsPerSlice) +
               " groups would not end on the tensor's last block";
    return r;
  }
  r.slices = slices;
  return r;
}

}  // namespace kiln::ir
