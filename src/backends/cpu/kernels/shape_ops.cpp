// CPU kernels of ops that reinterpret a tensor's shape (views of the input's storage) or build
// a tensor from a shape: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout, Shape, Size,
// Expand, ConstantOfShape, Range, EyeLike.

#include <type_traits>

#include "backends/cpu/broadcast.h"
#include "backends/cpu/kernels/copy_util.h"
#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/run_checks.h"
#include "ir/ops/shape_rules.h"

namespace kiln::cpu {
namespace {

Shape concrete(const KernelContext& ctx, const ir::SymShape& shape) {
  auto s = ir::concreteShape(shape);
  if (!s)
    ctx.fail("output shape " + ir::symShapeToString(shape) + " is not concrete (internal error)");
  return *s;
}

// The shape rules that fail naming the node get its label, and the attributes they would read.
struct ShapeAttrs {
  ir::Node label;
  bool allowZero = false;                    // Reshape, opset 14 on
  std::optional<std::vector<int64_t>> axes;  // Squeeze / Unsqueeze before opset 13 (then input 1)
};

ShapeAttrs shapeAttrs(const ir::Node& node) {
  ShapeAttrs a;
  a.label = nodeLabel(node);
  a.allowZero = node.opset >= 14 && ir::attrInt(node, "allowzero", 0) != 0;
  if (node.opset < 13) a.axes = ir::attrInts(node, "axes", {});
  return a;
}

void reshapeKernel(KernelContext& ctx, const ShapeAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  ir::SymShape out = ir::reshapeSymShape(attrs.label, ir::symShapeOf(x.shape()),
                                         ctx.input(1).toInt64Vector(), attrs.allowZero);
  ctx.setOutput(0, x.reshaped(concrete(ctx, out)));
}

void flattenKernel(KernelContext& ctx, int64_t axisAttr) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  int64_t axis = axisAttr;
  if (axis < -rank || axis > rank)
    ctx.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  if (axis < 0) axis += rank;
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  ctx.setOutput(0, x.reshaped({outer, outer == 0 ? 0 : x.numel() / outer}));
}

// The axes of Squeeze / Unsqueeze: the attribute before opset 13, input 1 (optional) from then on.
std::vector<int64_t> axesOf(const KernelContext& ctx, const ShapeAttrs& attrs) {
  if (attrs.axes) return *attrs.axes;
  return ctx.hasInput(1) ? ctx.input(1).toInt64Vector() : std::vector<int64_t>{};
}

void squeezeKernel(KernelContext& ctx, const ShapeAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  ctx.setOutput(0,
                x.reshaped(concrete(ctx, ir::squeezeSymShape(attrs.label, ir::symShapeOf(x.shape()),
                                                             axesOf(ctx, attrs)))));
}

void unsqueezeKernel(KernelContext& ctx, const ShapeAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  ctx.setOutput(
      0, x.reshaped(concrete(ctx, ir::unsqueezeSymShape(attrs.label, ir::symShapeOf(x.shape()),
                                                        axesOf(ctx, attrs)))));
}

void identityKernel(KernelContext& ctx) { ctx.setOutput(0, ctx.input(0)); }

// Inference only: training_mode (opset 12+) must be off, or the ratio 0.
void dropoutKernel(KernelContext& ctx, bool hasTrainingMode) {
  const Tensor& x = ctx.input(0);
  if (hasTrainingMode && ctx.hasInput(2) && ctx.input(2).numel() == 1 &&
      ctx.input(2).intAt(0) != 0) {
    double ratio = ctx.hasInput(1) ? ctx.input(1).doubleAt(0) : 0.5;
    if (ratio != 0)
      ctx.fail("training mode (random dropout) is not supported", ErrorCode::kUnsupportedNode);
  }
  ctx.setOutput(0, x);
  if (ctx.wantsOutput(1)) {
    Tensor& mask = ctx.output(1);
    dispatchNumericOrBool(mask.dtype(), "Dropout", [&](auto tag) {
      using T = typename decltype(tag)::type;
      std::fill(mask.data<T>(), mask.data<T>() + mask.numel(), static_cast<T>(1.0f));
    });
  }
}

// Shape's "start" (opset 15 on; 0 before).
int64_t shapeStart(const ir::Node& node) {
  return node.opset >= 15 ? ir::attrInt(node, "start", 0) : 0;
}

void shapeKernel(KernelContext& ctx, int64_t startAttr) {
  const Shape& dims = ctx.input(0).shape();
  Tensor& y = ctx.output(0);
  const int64_t rank = static_cast<int64_t>(dims.size());
  const int64_t start = std::clamp<int64_t>(startAttr < 0 ? startAttr + rank : startAttr, 0, rank);
  for (int64_t i = 0; i < y.numel(); ++i) y.data<int64_t>()[i] = dims[start + i];
}

void sizeKernel(KernelContext& ctx) { ctx.output(0).data<int64_t>()[0] = ctx.input(0).numel(); }

void expandKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Shape outShape = broadcastShapes(ctx, x.shape(), ctx.input(1).toInt64Vector());
  Tensor& y = ctx.allocateOutput(0, x.dtype(), outShape);
  copyStridedTensor(x, 0, broadcastStrides(x.shape(), outShape), y, "Expand");
}

// ConstantOfShape's "value"; none: zeros.
std::optional<Tensor> constantValue(const ir::Node& node) {
  if (!ir::hasAttr(node, "value")) return std::nullopt;
  return ir::attrTensor(node, "value");
}

void constantOfShapeKernel(KernelContext& ctx, const std::optional<Tensor>& constant) {
  Tensor& y = ctx.output(0);
  if (!constant) return;  // zero-filled float
  const Tensor& value = *constant;
  dispatchStorage(y.dtype(), "ConstantOfShape", [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::fill(y.data<T>(), y.data<T>() + y.numel(), value.data<T>()[0]);
  });
}

void rangeKernel(KernelContext& ctx) {
  Tensor& y = ctx.output(0);
  dispatchNumeric(y.dtype(), "Range", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Integers in 128 bits: each value fits in T, but i * delta on the way may not (start 2e9,
    // delta -8.5e8 in int32).
    using C = std::conditional_t<std::is_integral_v<T>, __int128, ComputeType<T>>;
    const C start = static_cast<C>(ctx.input(0).data<T>()[0]);
    const C delta = static_cast<C>(ctx.input(2).data<T>()[0]);
    T* out = y.data<T>();
    for (int64_t i = 0; i < y.numel(); ++i)
      out[i] = static_cast<T>(start + static_cast<C>(i) * delta);
  });
}

void eyeLikeKernel(KernelContext& ctx, int64_t k) {
  Tensor& y = ctx.output(0);
  const int64_t rows = y.dim(0), cols = y.dim(1);
  dispatchNumericOrBool(y.dtype(), "EyeLike", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = y.data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      int64_t c = r + k;
      if (c >= 0 && c < cols) out[r * cols + c] = static_cast<T>(1.0f);
    }
  });
}

KILN_REGISTER_CPU_KERNEL_WITH_RULES("Reshape", bindKernel(shapeAttrs, reshapeKernel), {{}, true});
KILN_REGISTER_CPU_KERNEL_WITH_RULES(
    "Flatten",
    bindKernel([](const ir::Node& node) { return ir::attrInt(node, "axis", 1); }, flattenKernel),
    {{}, true});
KILN_REGISTER_CPU_KERNEL_WITH_RULES("Squeeze", bindKernel(shapeAttrs, squeezeKernel), {{}, true});
KILN_REGISTER_CPU_KERNEL_WITH_RULES("Unsqueeze", bindKernel(shapeAttrs, unsqueezeKernel),
                                    {{}, true});
KILN_REGISTER_CPU_KERNEL_WITH_RULES("Identity", identityKernel, {{}, true});
KILN_REGISTER_CPU_KERNEL_WITH_RULES(
    "Dropout", bindKernel([](const ir::Node& node) { return node.opset >= 12; }, dropoutKernel),
    {{}, true});
KILN_REGISTER_CPU_KERNEL("Shape", bindKernel(shapeStart, shapeKernel));
KILN_REGISTER_CPU_KERNEL("Size", sizeKernel);
KILN_REGISTER_CPU_KERNEL("Expand", expandKernel);
KILN_REGISTER_CPU_KERNEL("ConstantOfShape", bindKernel(constantValue, constantOfShapeKernel));
KILN_REGISTER_CPU_KERNEL("Range", rangeKernel);
KILN_REGISTER_CPU_KERNEL("EyeLike",
                         bindKernel([](const ir::Node& node) { return ir::attrInt(node, "k", 0); },
                                    eyeLikeKernel));

}  // namespace
}  // namespace kiln::cpu
