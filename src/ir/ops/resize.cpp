// Shape and type rules of Resize (opset 10+) and Upsample (opsets 7-9).
// The output size comes from `sizes` when given (non-empty), else floor(input * scale);
// when those values are only known at run time, the resized dims stay unknown until then.
#include <cmath>

#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

constexpr double kMaxDim = 4611686018427387904.0;  // 2^62: larger sizes cannot be allocated anyway

bool isEmptyInput(const InferContext& ctx, size_t i) {
  if (!ctx.hasInput(i)) return true;
  if (const Tensor* t = ctx.inputValue(i)) return t->numel() == 0;
  const SymShape* s = ctx.inputShape(i);
  return s && s->size() == 1 && (*s)[0].isKnown() && (*s)[0].value == 0;
}

/// The axes that `scales`/`sizes` refer to: the `axes` attribute (opset 18+) or every axis.
std::vector<int64_t> resizedAxes(const InferContext& ctx, int64_t rank) {
  std::vector<int64_t> axes;
  if (ctx.node().opType == "Resize" && ctx.opset() >= 18 && hasAttr(ctx.node(), "axes")) {
    for (int64_t a : attrInts(ctx.node(), "axes")) {
      int64_t axis = normalizeAxis(ctx, a, rank);
      for (int64_t seen : axes) {
        if (seen == axis) ctx.fail("attribute 'axes' repeats axis " + std::to_string(a));
      }
      axes.push_back(axis);
    }
  } else {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  return axes;
}

/// The scales as doubles, from the Upsample-7 attribute or the scales input; nullopt if unknown
/// yet.
std::optional<std::vector<double>> knownScales(const InferContext& ctx, size_t scalesInput) {
  std::vector<double> scales;
  if (ctx.node().opType == "Upsample" && ctx.opset() < 9) {
    for (float s : attrFloats(ctx.node(), "scales")) scales.push_back(s);
    return scales;
  }
  const Tensor* t = ctx.inputValue(scalesInput);
  if (!t) return std::nullopt;
  if (!isFloatingPoint(t->dtype()))
    ctx.fail("input 'scales' must be floating point, got " + t->describe());
  for (int64_t i = 0; i < t->numel(); ++i) scales.push_back(t->doubleAt(i));
  return scales;
}

void setResizedDimsFromSizes(const InferContext& ctx, const std::vector<int64_t>& sizes,
                             const std::vector<int64_t>& axes, SymShape& out) {
  if (sizes.size() != axes.size()) {
    ctx.fail("input 'sizes' has " + std::to_string(sizes.size()) + " values, expected " +
             std::to_string(axes.size()));
  }
  for (int64_t s : sizes) {
    if (s < 0) ctx.fail("input 'sizes' has a negative value " + std::to_string(s));
  }
  std::string policy =
      ctx.opset() >= 18 ? attrString(ctx.node(), "keep_aspect_ratio_policy", "stretch") : "stretch";
  if (policy == "stretch") {
    for (size_t i = 0; i < axes.size(); ++i)
      out[static_cast<size_t>(axes[i])] = Dim::known(sizes[i]);
    return;
  }
  if (policy != "not_larger" && policy != "not_smaller") {
    ctx.fail(
        "attribute 'keep_aspect_ratio_policy' must be stretch, not_larger or not_smaller, got '" +
        policy + "'");
  }
  // One scale for every resized axis: the smallest (not_larger) or largest (not_smaller) ratio.
  std::optional<double> scale;
  for (size_t i = 0; i < axes.size(); ++i) {
    const Dim& in = out[static_cast<size_t>(axes[i])];
    if (!in.isKnown()) {
      for (int64_t a : axes) out[static_cast<size_t>(a)] = Dim::unknown();
      return;
    }
    if (in.value == 0) ctx.fail("cannot keep the aspect ratio of an empty axis");
    double ratio = static_cast<double>(sizes[i]) / static_cast<double>(in.value);
    if (!scale || (policy == "not_larger" ? ratio < *scale : ratio > *scale)) scale = ratio;
  }
  for (int64_t a : axes) {
    Dim& d = out[static_cast<size_t>(a)];
    double size = std::floor(*scale * static_cast<double>(d.value) + 0.5);
    if (size > kMaxDim)
      ctx.fail("keep_aspect_ratio_policy makes axis " + std::to_string(a) + " too large");
    d = Dim::known(static_cast<int64_t>(size));
  }
}

void setResizedDimsFromScales(const InferContext& ctx, const std::vector<double>& scales,
                              const std::vector<int64_t>& axes, SymShape& out) {
  if (scales.size() != axes.size()) {
    ctx.fail("has " + std::to_string(scales.size()) + " scales, expected " +
             std::to_string(axes.size()));
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    if (!(scales[i] > 0) || !std::isfinite(scales[i]))
      ctx.fail("scales must be positive and finite, got " + std::to_string(scales[i]));
    Dim& d = out[static_cast<size_t>(axes[i])];
    if (scales[i] == 1.0) continue;  // keeps a symbolic dim
    if (!d.isKnown()) {
      d = Dim::unknown();
      continue;
    }
    double size = std::floor(scales[i] * static_cast<double>(d.value));
    if (size > kMaxDim)
      ctx.fail("scale " + std::to_string(scales[i]) + " makes axis " + std::to_string(axes[i]) +
               " too large");
    d = Dim::known(static_cast<int64_t>(size));
  }
}

void inferResize(InferContext& ctx) {
  ctx.requireInput(0);
  DataType dtype = ctx.inputType(0);
  if (dtype == DataType::kString || dtype == DataType::kBool) {
    ctx.fail("does not accept " + dataTypeName(dtype), ErrorCode::kUnsupportedNode);
  }
  const SymShape* xShape = ctx.inputShape(0);
  if (!xShape) {
    ctx.setOutputType(0, dtype);
    return;
  }
  int64_t rank = static_cast<int64_t>(xShape->size());
  std::vector<int64_t> axes = resizedAxes(ctx, rank);
  SymShape out = *xShape;

  bool isResize11 = ctx.node().opType == "Resize" && ctx.opset() >= 11;
  size_t scalesInput = isResize11 ? 2 : 1;
  if (isResize11 && !isEmptyInput(ctx, 3)) {
    if (auto sizes = ctx.inputInts(3)) {
      setResizedDimsFromSizes(ctx, *sizes, axes, out);
    } else {
      for (int64_t a : axes) out[static_cast<size_t>(a)] = Dim::unknown();
    }
  } else if (auto scales = knownScales(ctx, scalesInput)) {
    if (scales->empty()) ctx.fail("needs non-empty 'scales' or 'sizes'");
    setResizedDimsFromScales(ctx, *scales, axes, out);
  } else {
    if (!ctx.hasInput(scalesInput)) ctx.fail("needs 'scales' or 'sizes'");
    for (int64_t a : axes) out[static_cast<size_t>(a)] = Dim::unknown();
  }
  ctx.setOutput(0, dtype, std::move(out));
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "Resize", 10, 1000, inferResize});
KILN_REGISTER_OP_SCHEMA({"", "Upsample", 7, 9, inferResize});

}  // namespace kiln::ir
