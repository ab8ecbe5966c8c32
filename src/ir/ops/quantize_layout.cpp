#include "ir/ops/quantize_layout.h"

#include <string>

#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

// ONNX's names of inputs 1 and 2: y_scale / y_zero_point for QuantizeLinear, x_* for
// DequantizeLinear.
std::string paramName(const Node& node, size_t input) {
  const char* prefix = node.opType == "QuantizeLinear" ? "y_" : "x_";
  return std::string(prefix) + (input == 1 ? "scale" : "zero_point") + " (input " +
         std::to_string(input) + ")";
}

// The scale's shape fixes the layout; the zero point, when present, must have the same shape.
QuantLayout layoutOfScale(const Node& node, const Shape& x, const Shape& scale) {
  QuantLayout layout;
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t blockSize = node.opset >= 21 ? attrInt(node, "block_size", 0) : 0;
  if (blockSize < 0)
    failNode(node, "block_size must not be negative, got " + std::to_string(blockSize));
  if (shapeNumel(scale) == 1) return layout;  // per tensor, whatever block_size says
  if (node.opset < 13) {
    failNode(node, paramName(node, 1) + " must hold one value before opset 13, got shape " +
                       shapeToString(scale));
  }
  const int64_t axis = normalizeAxis(node, attrInt(node, "axis", 1), rank);
  layout.perTensor = false;
  layout.blockSize = blockSize;
  layout.axisDim = x[static_cast<size_t>(axis)];
  for (int64_t d = 0; d < axis; ++d)
    layout.outer =
        multiplyDims(node, layout.outer, x[static_cast<size_t>(d)], "x's size before the axis");
  for (int64_t d = axis + 1; d < rank; ++d)
    layout.inner =
        multiplyDims(node, layout.inner, x[static_cast<size_t>(d)], "x's size after the axis");
  if (blockSize == 0) {
    if (scale.size() != 1 || scale[0] != layout.axisDim) {
      failNode(node, paramName(node, 1) + " has shape " + shapeToString(scale) +
                         " but per-axis quantization along axis " + std::to_string(axis) +
                         " of x " + shapeToString(x) + " needs shape " +
                         shapeToString(Shape{layout.axisDim}));
    }
    return layout;
  }
  Shape expected = x;
  expected[static_cast<size_t>(axis)] = ceilDiv(layout.axisDim, blockSize);
  if (scale != expected) {
    failNode(node, paramName(node, 1) + " has shape " + shapeToString(scale) + " but blocks of " +
                       std::to_string(blockSize) + " along axis " + std::to_string(axis) +
                       " of x " + shapeToString(x) + " need shape " + shapeToString(expected));
  }
  return layout;
}

}  // namespace

QuantLayout quantLayout(const Node& node, const Shape& x, const Shape& scale,
                        const Shape* zeroPoint) {
  QuantLayout layout = layoutOfScale(node, x, scale);
  if (zeroPoint && *zeroPoint != scale && !(shapeNumel(*zeroPoint) == 1 && layout.perTensor)) {
    failNode(node, paramName(node, 2) + " has shape " + shapeToString(*zeroPoint) + " but " +
                       paramName(node, 1) + " has shape " + shapeToString(scale) +
                       "; they must match");
  }
  return layout;
}

}  // namespace kiln::ir
