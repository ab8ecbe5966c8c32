// NchwcConv with its optional X scale S (ir/ops/nchwc.h): conv(X * S, W) computed as conv(X, W *
// S), the packed weights of each input channel ci multiplied by S[ci] once per image, so that the
// per-element Mul over all of X (a squeeze-excitation block's) is never made.
#pragma once
#include <cstdint>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/nchwc_conv.h"
#include "core/internal_api.h"

namespace kiln::cpu {

/// Weights packed for a blocked X (NchwcWeightLayout::kBlockedInput, `shape`'s sizes) with each
/// input channel ci < Ci multiplied by scale[ci], into `out` (as many floats); the zero weights of
/// the padding channels stay zero whatever scale holds there.
void scaleNchwcBlockedWeights(const NchwcConvShape& shape, const float* packed, const float* scale,
                              float* out);

/// nchwcConv on X * S for a blocked X and group 1 on `isa`: image n reads the scale at
/// scale + n * scaleImageStride (blocked, ceil(Ci / 16) * 16 floats; stride 0 shares one). Runs
/// image by image on packed weights scaled into args.scratch (as many floats as the packing; null:
/// a buffer of its own).
KILN_INTERNAL_API void nchwcConvScaledInput(const NchwcConvArgs& args, const float* scale,
                                            int64_t scaleImageStride, CpuIsa isa = activeCpuIsa());

/// The NchwcConv kernel's path for its X scale input S: checks S against the call (float32
/// [N or 1, ceil(Ci / 16), 1, 1, 16], X blocked, group 1, weights packed for a blocked X) and runs
/// nchwcConvScaledInput with the kernel's workspace; fails through ctx naming what is wrong.
void runNchwcConvWithInputScale(KernelContext& ctx, NchwcConvArgs& args, const Tensor& scale,
                                CpuIsa isa);

}  // namespace kiln::cpu
