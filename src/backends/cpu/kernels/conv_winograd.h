// Winograd F(2x2, 3x3) convolution for 3x3, stride-1, dilation-1, ungrouped 2-D float convolutions:
// each 2x2 output tile costs 16 multiplies per channel pair instead of 36, done as 16 GEMMs
// U[xi] (OC x IC) @ V[xi] (IC x tiles) over the transformed filters U and input tiles V.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/ops/conv_geometry.h"

namespace kiln::cpu {

/// Whether the Winograd path applies and pays off for this geometry and channel counts.
bool winogradSupported(const ir::ConvGeometry& g, int64_t group, int64_t channels, int64_t outChannels);

/// The transformed filters U = G w G^T, laid out [16][outChannels][channels], from w [OC, IC, 3, 3].
std::vector<float> winogradFilters(const float* w, int64_t outChannels, int64_t channels);

/// y[n] = conv(x[n], w) without bias for every image; U from winogradFilters.
void winogradConv2d(const ir::ConvGeometry& g, int64_t batch, int64_t channels, int64_t height, int64_t width,
                    int64_t outChannels, const float* x, const float* filters, float* y);

}  // namespace kiln::cpu
