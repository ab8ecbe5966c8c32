// Resize's per-axis sampling plan: attributes, the coordinate transformation of every
// coordinate_transformation_mode, and the source taps and weights of each output position.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::cpu::resize {

enum class Mode { kNearest, kLinear, kCubic };
enum class Transform {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfCropAndResize,
  kTfHalfPixelForNn
};
// kSimple is Upsample's and Resize-10's rule: ceil when downsampling, truncate when upsampling.
enum class Rounding { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };

struct ResizeAttrs {
  Mode mode = Mode::kNearest;
  Transform transform = Transform::kHalfPixel;
  Rounding rounding = Rounding::kRoundPreferFloor;
  double cubicA = -0.75;
  bool excludeOutside = false;
  double extrapolation = 0.0;
  bool antialias = false;
  std::string aspectPolicy = "stretch";
  bool hasAxesAttr = false;
  std::vector<int64_t> axesAttr;
  bool hasRoiAndSizes = false;  // Resize-11+: inputs X, roi, scales, sizes
  bool scalesFromAttr = false;  // Upsample-7: scales is an attribute
  std::vector<float> scalesAttr;
};

/// Reads the attributes of a Resize or Upsample node, with the defaults of its opset.
ResizeAttrs parseResizeAttrs(const ir::Node& node);

/// Per-axis parameters of one call: scale, roi and sizes.
struct AxisParams {
  int64_t inLen = 0;
  int64_t outLen = 0;
  double scale = 1.0;
  double roiStart = 0.0;
  double roiEnd = 1.0;

  bool isIdentity() const {
    return inLen == outLen && std::fabs(scale - 1.0) <= 1e-9 && roiStart == 0.0 && roiEnd == 1.0;
  }
};

/// Source taps of every output position along one axis.
struct AxisPlan {
  int64_t taps = 1;
  std::vector<int64_t> index;        // outLen * taps, clamped into [0, inLen)
  std::vector<double> weight;        // outLen * taps (empty for nearest)
  std::vector<uint8_t> extrapolate;  // outLen: 1 where tf_crop_and_resize samples outside the input
};

/// The taps of every output position along one axis.
AxisPlan planAxis(const ResizeAttrs& attrs, const AxisParams& params);

}  // namespace kiln::cpu::resize
