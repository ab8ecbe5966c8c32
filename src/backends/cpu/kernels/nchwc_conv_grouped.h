// Grouped NchwcConv (group > 1, not depthwise) as independent direct convolutions over slices of
// whole channel blocks (ir/ops/nchwc_groups.h): the AVX-512 and AVX2 direct kernels run each
// (image, slice) pair as a one-image group-1 convolution, with pointers moved to the slice's
// blocks of X, W, B, Z and Y. A group-1 convolution is one slice, so the kernels walk every
// convolution this way.
#pragma once
#include <cstdint>

#include "backends/cpu/kernels/nchwc_conv.h"
#include "core/internal_api.h"

namespace kiln::cpu {

/// Slice k of `s` as a group-1 convolution of one image: the slice's real channels (a last slice
/// may hold fewer groups), the same spatial geometry.
NchwcConvShape nchwcSliceShape(const NchwcConvShape& s, int64_t k);

/// The arguments of slice k of image n: `slice` (from nchwcSliceShape) and X, W, B, Z, Y moved to
/// its blocks. X may be plain (group 1, one slice) in the padded [N, Hp, Wp, Ci] copy nchwcConv
/// makes.
NchwcConvArgs nchwcSliceArgs(const NchwcConvArgs& a, const NchwcConvShape& slice, int64_t n,
                             int64_t k);

/// Packs W [Co, Ci / group, kH, kW] of a grouped convolution for a blocked X: each slice's weights
/// as packNchwcWeights packs a dense convolution of its channels, with zeros between its groups.
/// The convolution must split into slices (ir::nchwcGroupSlices).
KILN_INTERNAL_API NchwcPackedWeights packNchwcGroupedWeights(const float* w, int64_t outChannels,
                                                             int64_t inChannels, int64_t group,
                                                             int64_t kernelH, int64_t kernelW);

/// Floats packNchwcGroupedWeights makes.
int64_t nchwcGroupedWeightFloats(int64_t outChannels, int64_t inChannels, int64_t group,
                                 int64_t kernelH, int64_t kernelW);

}  // namespace kiln::cpu
