// Direct 2-D convolution for few output channels (plain NCHW layout), such as the last layer of
// an image-to-image network (32 -> 3 channels, 5x5). There im2col + GEMM writes and re-reads a
// column matrix Ci * K * K times the size of the input to feed a GEMM only Co rows high, so it is
// bound by memory traffic; this kernel instead accumulates every tap straight from the input rows
// into registers, Co output channels x several 16-float vectors of one output row at a time.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cpu/activation.h"
#include "backends/cpu/cpu_isa.h"
#include "core/internal_api.h"
#include "ir/ops/conv_geometry.h"

namespace kiln::cpu {

/// The most output channels the direct kernel computes from one pass over the input; more are
/// taken in balanced groups of at most this many.
constexpr int64_t kFewOutputsChannelBlock = 4;

/// W [Co, Ci, KH, KW] reordered for fewOutputConv2d: per group of output channels (see
/// kFewOutputsChannelBlock), the values [ci][ky][kx][c] so that the weights of one tap for all
/// channels of the group lie together. `packed` holds floats() values: packFewOutputWeights'
/// own, or a plan's (a restored kernel views them where they lie).
struct FewOutputWeights {
  int64_t outChannels = 0, inChannels = 0, kernelH = 0, kernelW = 0;
  std::shared_ptr<const float> packed;
  int64_t floats() const { return outChannels * inChannels * kernelH * kernelW; }
};

/// Packs W (float32, [outChannels, inChannels, kernelH, kernelW], row-major).
KILN_INTERNAL_API FewOutputWeights packFewOutputWeights(const float* w, int64_t outChannels,
                                                        int64_t inChannels, int64_t kernelH,
                                                        int64_t kernelW);

/// Whether W's shape alone (group 1, 2-D kernel) could take the direct kernel: worth packing
/// its weights when the kernel is made.
bool fewOutputWeightsUseful(int64_t group, int64_t outChannels, int64_t kernelRank, int64_t kernelH,
                            int64_t kernelW);

/// The rule for when fewOutputConv2d replaces im2col + GEMM: group 1, 2-D, stride 1, dilation 1,
/// kernels up to 11 x 11 and at most 16 output channels (4 for 1x1 kernels); see the .cpp for
/// the measurements behind it.
KILN_INTERNAL_API bool fewOutputConvPreferred(const ir::ConvGeometry& g, int64_t group,
                                              int64_t inChannels, int64_t outChannels);

/// y[n, co] = act(sum over ci, taps of x[n, ci] * w[co, ci] + bias[co] + residual[n, co]) for
/// x [batch, w.inChannels, height, width], y and residual (may be null) shaped [batch,
/// w.outChannels, g.output]; bias may be null. Split over the current thread pool by output rows.
/// Call only when fewOutputConvPreferred says so. The AVX-512 or the AVX2 kernel as `isa` says
/// (the candidate chosen for the node; the CPU must have it).
KILN_INTERNAL_API void fewOutputConv2d(const ir::ConvGeometry& g, int64_t batch, int64_t height,
                                       int64_t width, const float* x, const FewOutputWeights& w,
                                       const float* bias, const float* residual,
                                       const Activation& act, float* y,
                                       CpuIsa isa = activeCpuIsa());

namespace detail {
/// A group of output channels [first, first + count) computed together.
struct FewOutputGroup {
  int64_t first = 0, count = 0;
};

/// outChannels split into the fewest groups of at most kFewOutputsChannelBlock, sizes differing
/// by at most one (7 -> 4 + 3, not 4 + 1 + ...), in order.
KILN_INTERNAL_API std::vector<FewOutputGroup> fewOutputGroups(int64_t outChannels);

/// fewOutputConv2d on 16-float vectors; call only when the CPU has AVX-512.
void fewOutputConv2dAvx512(const ir::ConvGeometry& g, int64_t batch, int64_t height, int64_t width,
                           const float* x, const FewOutputWeights& w, const float* bias,
                           const float* residual, const Activation& act, float* y);
}  // namespace detail

}  // namespace kiln::cpu
