// Bicubic resize, the compute of the Test::DynamicTRTResize example plugin (the OpenMMLab plugin
// tutorial's SRCNN variant): NCHW float input resized to outH x outW, with exactly the semantics
// of PyTorch's F.interpolate(x, size=(outH, outW), mode='bicubic', align_corners=...):
//   - cubic convolution kernel with coefficient A = -0.75 (Keys), 4 taps per axis;
//   - source coordinate of output index d along an axis of in -> out:
//       align_corners=false: (d + 0.5) * in / out - 0.5  (not clamped at 0, unlike linear)
//       align_corners=true:  d * (in - 1) / (out - 1), and 0 when out == 1;
//   - taps outside the input are clamped to the border row / column (edge replication);
//   - separable: each output is the vertical combination of 4 horizontally interpolated rows.
// As in PyTorch's CPU kernel, the scale is a float division and the source coordinate and
// weights are computed in double (then weights stored as float); the sums are in float. (ONNX
// Resize's pytorch_half_pixel differs when out == 1 and rounds differently, hence this separate
// plan rather than backends/cpu/kernels/resize_plan.h.)
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace kiln::plugins {

/// The 4 source taps (clamped into [0, inLen)) and weights of every output index along one axis.
struct BicubicAxisPlan {
  std::vector<std::array<int64_t, 4>> index;  // outLen entries
  std::vector<std::array<float, 4>> weight;   // outLen entries, each summing to 1 up to rounding
};

/// The taps of one axis resized from inLen to outLen (both >= 1).
BicubicAxisPlan planBicubicAxis(int64_t inLen, int64_t outLen, bool alignCorners);

/// Resizes planes (= N * C) contiguous inH x inW float planes of `input` to outH x outW planes of
/// `output`, with rows = planBicubicAxis(inH, outH, ..) and cols = planBicubicAxis(inW, outW, ..).
/// Split over the threads by output rows (kiln::parallelFor). Allocates nothing.
void bicubicResize(const float* input, float* output, int64_t planes, int64_t inH, int64_t inW,
                   const BicubicAxisPlan& rows, const BicubicAxisPlan& cols);

/// The same, planning both axes first (allocates the two plans).
void bicubicResize(const float* input, float* output, int64_t planes, int64_t inH, int64_t inW,
                   int64_t outH, int64_t outW, bool alignCorners);

}  // namespace kiln::plugins
