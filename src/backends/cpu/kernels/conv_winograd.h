// Winograd F(2x2, 3x3) convolution for 3x3, stride-1, dilation-1, ungrouped 2-D float convolutions:
// each 2x2 output tile costs 16 multiplies per channel pair instead of 36, done as 16 GEMMs
// U[xi] (OC x IC) @ V[xi] (IC x tiles) over the transformed filters U and input tiles V.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cpu/activation.h"
#include "backends/cpu/gemm/sgemm.h"
#include "core/internal_api.h"
#include "ir/ops/conv_geometry.h"

namespace kiln::cpu {

/// Whether the Winograd path can run this geometry (3x3, stride 1, dilation 1, ungrouped).
bool winogradApplies(const ir::ConvGeometry& g, int64_t group);
/// Whether the heuristics expect it to beat im2col + GEMM at these channel counts (a builder at
/// optimization level 1 or more times both instead of asking).
bool winogradPreferred(const ir::ConvGeometry& g, int64_t channels, int64_t outChannels);

/// The transformed filters U = G w G^T, laid out [16][outChannels][channels], from w [OC, IC, 3,
/// 3].
std::vector<float> winogradFilters(const float* w, int64_t outChannels, int64_t channels);

/// The 16 matrices U[xi] (OC x IC) of winogradFilters, each packed as a GEMM left operand once,
/// so a convolution's 16 products per tile block do not re-pack the filters every time.
struct WinogradWeights {
  std::vector<PackedMatrix> u;
};
KILN_INTERNAL_API WinogradWeights packWinogradFilters(const float* w, int64_t outChannels,
                                                      int64_t channels,
                                                      CpuIsa isa = activeCpuIsa());

/// What follows the convolution, applied to each run of finished output rows while it is in
/// cache: y = act(y + bias[o] + residual), residual shaped like y (both optional).
struct WinogradEpilogue {
  const float* bias = nullptr;
  const float* residual = nullptr;
  Activation act;
};

/// Scratch bytes of winogradConv2d for this geometry on `threads` threads, with filters packed
/// for `isa`: one tile block's transformed inputs V and products M, and the products' packing.
KILN_INTERNAL_API uint64_t winogradWorkspaceBytes(const ir::ConvGeometry& g, int64_t channels,
                                                  int64_t outChannels, CpuIsa isa, int threads);

/// y[n] = epilogue(conv(x[n], w)) for every image; U from packWinogradFilters; `workspace` holds
/// winogradWorkspaceBytes(g, channels, outChannels, U's isa, poolThreads()) bytes, 64-byte
/// aligned.
KILN_INTERNAL_API void winogradConv2d(const ir::ConvGeometry& g, int64_t batch, int64_t channels,
                                      int64_t height, int64_t width, int64_t outChannels,
                                      const float* x, const WinogradWeights& filters, float* y,
                                      void* workspace, const WinogradEpilogue& epilogue = {});

}  // namespace kiln::cpu
