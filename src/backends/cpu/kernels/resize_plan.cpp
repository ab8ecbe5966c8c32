// Resize's sampling plan: attribute parsing, coordinate transformations and filter taps.
#include "backends/cpu/kernels/resize_plan.h"

#include <algorithm>

#include "ir/node_attrs.h"

namespace kiln::cpu::resize {
namespace {

Mode parseMode(const ir::Node& node, bool allowCubic) {
  std::string mode = ir::attrString(node, "mode", "nearest");
  if (mode == "nearest") return Mode::kNearest;
  if (mode == "linear" || mode == "bilinear") return Mode::kLinear;
  if (mode == "cubic" && allowCubic) return Mode::kCubic;
  ir::failNode(node, "unsupported mode '" + mode + "'", ErrorCode::kUnsupportedNode);
}

Transform parseTransform(const ir::Node& node) {
  std::string name = ir::attrString(node, "coordinate_transformation_mode", "half_pixel");
  if (name == "half_pixel") return Transform::kHalfPixel;
  if (name == "half_pixel_symmetric") return Transform::kHalfPixelSymmetric;
  if (name == "pytorch_half_pixel") return Transform::kPytorchHalfPixel;
  if (name == "align_corners") return Transform::kAlignCorners;
  if (name == "asymmetric") return Transform::kAsymmetric;
  if (name == "tf_crop_and_resize") return Transform::kTfCropAndResize;
  if (name == "tf_half_pixel_for_nn") return Transform::kTfHalfPixelForNn;
  ir::failNode(node, "unsupported coordinate_transformation_mode '" + name + "'",
               ErrorCode::kUnsupportedNode);
}

Rounding parseRounding(const ir::Node& node) {
  std::string name = ir::attrString(node, "nearest_mode", "round_prefer_floor");
  if (name == "round_prefer_floor") return Rounding::kRoundPreferFloor;
  if (name == "round_prefer_ceil") return Rounding::kRoundPreferCeil;
  if (name == "floor") return Rounding::kFloor;
  if (name == "ceil") return Rounding::kCeil;
  ir::failNode(node, "unsupported nearest_mode '" + name + "'", ErrorCode::kUnsupportedNode);
}

}  // namespace

ResizeAttrs parseResizeAttrs(const ir::Node& node) {
  ResizeAttrs a;
  bool isResize11 = node.opType == "Resize" && node.opset >= 11;
  a.mode = parseMode(node, isResize11);
  if (!isResize11) {
    // Upsample and Resize-10 predate coordinate_transformation_mode and nearest_mode.
    a.transform = Transform::kAsymmetric;
    a.rounding = Rounding::kSimple;
    a.scalesFromAttr = node.opType == "Upsample" && node.opset < 9;
    if (a.scalesFromAttr) a.scalesAttr = ir::attrFloats(node, "scales");
    return a;
  }
  a.hasRoiAndSizes = true;
  a.transform = parseTransform(node);
  a.rounding = parseRounding(node);
  a.cubicA = ir::attrFloat(node, "cubic_coeff_a", -0.75f);
  a.excludeOutside = ir::attrInt(node, "exclude_outside", 0) != 0;
  a.extrapolation = ir::attrFloat(node, "extrapolation_value", 0.0f);
  if (node.opset >= 18) {
    a.antialias = ir::attrInt(node, "antialias", 0) != 0;
    a.aspectPolicy = ir::attrString(node, "keep_aspect_ratio_policy", "stretch");
    a.hasAxesAttr = ir::hasAttr(node, "axes");
    if (a.hasAxesAttr) a.axesAttr = ir::attrInts(node, "axes");
  }
  return a;
}

namespace {

/// Where output position y samples the input, in input coordinates.
double sourceCoordinate(const ResizeAttrs& a, const AxisParams& p, int64_t y) {
  double in = static_cast<double>(p.inLen);
  double outWidth = p.scale * in;  // not rounded: the reference maps through the exact scale
  double yd = static_cast<double>(y);
  switch (a.transform) {
    case Transform::kHalfPixel:
      return (yd + 0.5) / p.scale - 0.5;
    case Transform::kHalfPixelSymmetric: {
      double adjustment = static_cast<double>(p.outLen) / outWidth;
      double offset = in / 2 * (1 - adjustment);
      return offset + (yd + 0.5) / p.scale - 0.5;
    }
    case Transform::kPytorchHalfPixel:
      return outWidth == 1 ? -0.5 : (yd + 0.5) / p.scale - 0.5;
    case Transform::kAlignCorners:
      return outWidth == 1 ? 0.0 : yd * (in - 1) / (outWidth - 1);
    case Transform::kAsymmetric:
      return yd / p.scale;
    case Transform::kTfHalfPixelForNn:
      return (yd + 0.5) / p.scale;
    case Transform::kTfCropAndResize: {
      double span = (p.roiEnd - p.roiStart) * (in - 1);
      double x = outWidth == 1 ? span / 2 : yd * span / (outWidth - 1);
      return x + p.roiStart * (in - 1);
    }
  }
  return 0.0;
}
int64_t clampIndex(double i, int64_t len) {
  if (!(i > 0)) return 0;  // NaN (from a NaN roi) included
  return static_cast<int64_t>(std::min(i, static_cast<double>(len - 1)));
}

double nearestIndex(Rounding rounding, double x, double scale) {
  double fl = std::floor(x);
  switch (rounding) {
    case Rounding::kRoundPreferFloor:
      return x - fl <= 0.5 ? fl : fl + 1;
    case Rounding::kRoundPreferCeil:
      return x - fl < 0.5 ? fl : fl + 1;
    case Rounding::kFloor:
      return fl;
    case Rounding::kCeil:
      return std::ceil(x);
    case Rounding::kSimple:
      return scale < 1 ? std::ceil(x) : std::trunc(x);
  }
  return fl;
}

double filterWeight(Mode mode, double d, double a) {
  d = std::fabs(d);
  if (mode == Mode::kLinear) return d < 1 ? 1 - d : 0.0;
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0.0;
}

}  // namespace

AxisPlan planAxis(const ResizeAttrs& a, const AxisParams& p) {
  AxisPlan plan;
  bool extrapolates = a.transform == Transform::kTfCropAndResize;
  if (extrapolates) plan.extrapolate.assign(static_cast<size_t>(p.outLen), 0);
  double in = static_cast<double>(p.inLen);
  if (a.mode == Mode::kNearest) {
    plan.index.resize(static_cast<size_t>(p.outLen));
    for (int64_t y = 0; y < p.outLen; ++y) {
      double x = sourceCoordinate(a, p, y);
      if (extrapolates && (x < 0 || x > in - 1)) plan.extrapolate[static_cast<size_t>(y)] = 1;
      plan.index[static_cast<size_t>(y)] =
          clampIndex(nearestIndex(a.rounding, x, p.scale), p.inLen);
    }
    return plan;
  }
  // The filter spans `support` input pixels each side; antialiasing stretches it by 1/scale when
  // downsampling.
  double support = a.mode == Mode::kLinear ? 1.0 : 2.0;
  double filterScale = a.antialias ? std::min(p.scale, 1.0) : 1.0;
  int64_t first = static_cast<int64_t>(std::floor(-support / filterScale)) + 1;
  plan.taps = 2 - 2 * first;
  bool normalize = a.antialias || a.excludeOutside;
  plan.index.resize(static_cast<size_t>(p.outLen * plan.taps));
  plan.weight.resize(plan.index.size());
  for (int64_t y = 0; y < p.outLen; ++y) {
    double x = sourceCoordinate(a, p, y);
    if (extrapolates && (x < 0 || x > in - 1)) plan.extrapolate[static_cast<size_t>(y)] = 1;
    // Far outside the input every tap clamps to the edge; bounding x keeps the int conversion
    // defined.
    x = std::clamp(x, -in - static_cast<double>(plan.taps),
                   2 * in + static_cast<double>(plan.taps));
    double base = std::floor(x);
    int64_t* index = &plan.index[static_cast<size_t>(y * plan.taps)];
    double* weight = &plan.weight[static_cast<size_t>(y * plan.taps)];
    double sum = 0;
    for (int64_t k = 0; k < plan.taps; ++k) {
      double source = base + static_cast<double>(first + k);
      double w = filterWeight(a.mode, (source - x) * filterScale, a.cubicA);
      if (a.excludeOutside && (source < 0 || source > in - 1)) w = 0;
      index[k] = clampIndex(source, p.inLen);
      weight[k] = w;
      sum += w;
    }
    if (normalize && sum != 0) {
      for (int64_t k = 0; k < plan.taps; ++k) weight[k] /= sum;
    }
  }
  return plan;
}

}  // namespace kiln::cpu::resize
