// Deformable convolution v1/v2, the compute of the custom::deform_conv2d example plugin, with the
// semantics of torchvision.ops.deform_conv2d (torchvision's CPU kernel is the reference):
//   input  (N, Cin, H, W), weight (Cout, Cin / groups, kH, kW),
//   offset (N, 2 * offsetGroups * kH * kW, outH, outW): for offset group g and kernel tap
//          (i, j), channel 2 * (g * kH * kW + i * kW + j) holds dy and the next one dx,
//   mask   (N, offsetGroups * kH * kW, outH, outW), optional (modulation, DCNv2): channel
//          g * kH * kW + i * kW + j scales that tap's sample,
//   bias   (Cout), optional; output (N, Cout, outH, outW) with
//   outH = (H + 2 * padH - (dilationH * (kH - 1) + 1)) / strideH + 1 (likewise outW).
// Input channel c belongs to offset group c / (Cin / offsetGroups). The tap (i, j) of output
// (y, x) samples its channel at (y * strideH - padH + i * dilationH + dy,
// x * strideW - padW + j * dilationW + dx) bilinearly; a sample point with y <= -1, y >= H,
// x <= -1 or x >= W is 0, and of the 4 neighbours of a point inside, those outside the image
// count as 0. Computed as a deformable im2col into a column buffer, then one GEMM per group.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln::plugins {

/// Everything that fixes the computation: the node's attributes and the input shapes.
struct DeformConv2dParams {
  int64_t batch = 1, inChannels = 1, inHeight = 1, inWidth = 1;
  int64_t outChannels = 1, kernelHeight = 1, kernelWidth = 1;
  int64_t strideH = 1, strideW = 1, padH = 0, padW = 0, dilationH = 1, dilationW = 1;
  int64_t groups = 1, offsetGroups = 1;

  int64_t outHeight() const {
    return (inHeight + 2 * padH - (dilationH * (kernelHeight - 1) + 1)) / strideH + 1;
  }
  int64_t outWidth() const {
    return (inWidth + 2 * padW - (dilationW * (kernelWidth - 1) + 1)) / strideW + 1;
  }
};

/// The node attributes (ONNX contract: stride, padding, dilation as 2 ints, groups, offset_groups).
struct DeformConv2dAttrs {
  int64_t strideH = 1, strideW = 1, padH = 0, padW = 0, dilationH = 1, dilationW = 1;
  int64_t groups = 1, offsetGroups = 1;
};

/// Checks the attributes and the shapes of input, weight, offset and the optional mask and bias
/// against each other (as torchvision does) and returns the parameters; an INVALID_VALUE Status
/// naming the tensor, the expected and the actual value otherwise. `node` prefixes the messages.
Result<DeformConv2dParams> deformConv2dParams(const std::string& node,
                                              const DeformConv2dAttrs& attrs,
                                              const std::vector<int64_t>& inputDims,
                                              const std::vector<int64_t>& weightDims,
                                              const std::vector<int64_t>& offsetDims,
                                              const std::optional<std::vector<int64_t>>& maskDims,
                                              const std::optional<std::vector<int64_t>>& biasDims);

/// Floats of the column buffer deformConv2d needs: Cin * kH * kW * outH * outW (one image).
int64_t deformConv2dColumnsSize(const DeformConv2dParams& p);

/// Fills columns (Cin * kH * kW rows of outH * outW) with the masked, bilinearly sampled taps of
/// one image; mask may be null (every tap weighs 1). Split over the threads (kiln::parallelFor).
void deformableIm2col(const DeformConv2dParams& p, const float* image, const float* offset,
                      const float* mask, float* columns);

/// output = deform_conv2d(input, weight, offset, mask, bias) for the whole batch; mask and bias
/// may be null. columns is a buffer of deformConv2dColumnsSize(p) floats. Allocates nothing.
void deformConv2d(const DeformConv2dParams& p, const float* input, const float* weight,
                  const float* offset, const float* mask, const float* bias, float* output,
                  float* columns);

}  // namespace kiln::plugins
