// Shape and type rules of QuantizeLinear, DequantizeLinear (opsets 10, 13 per-axis, 19 float16
// scales, 21 blocked + 16-bit types, 23 output_dtype / precision) and DynamicQuantizeLinear.
#include "ir/ops/quantize_layout.h"
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

bool isQuantizedType(DataType t, int64_t opset) {
  if (t == DataType::kInt8 || t == DataType::kUint8) return true;
  return opset >= 21 && (t == DataType::kInt16 || t == DataType::kUint16);
}

// Scales are float before opset 19, then float, float16 or bfloat16 (QuantizeLinear 23 adds int32).
void requireScaleType(const InferContext& ctx, size_t input) {
  const DataType t = ctx.inputType(input);
  const bool ok = ctx.opset() < 19 ? t == DataType::kFloat32
                                   : isFloatingPoint(t) && t != DataType::kFloat64;
  if (!ok) ctx.fail("input " + std::to_string(input) + " (scale) cannot be " + dataTypeName(t), ErrorCode::kUnsupportedNode);
}

// When x, scale and zero point shapes are all known, checks them as the kernel will.
void checkLayout(const InferContext& ctx) {
  const auto x = ctx.inputConcreteShape(0);
  const auto scale = ctx.inputConcreteShape(1);
  if (!x || !scale) return;
  std::optional<Shape> zeroPoint;
  if (ctx.hasInput(2)) {
    zeroPoint = ctx.inputConcreteShape(2);
    if (!zeroPoint) return;
  }
  quantLayout(ctx.node(), *x, *scale, zeroPoint ? &*zeroPoint : nullptr);
}

void setLikeInput0(InferContext& ctx, size_t output, DataType dtype) {
  if (const SymShape* x = ctx.inputShape(0)) {
    ctx.setOutput(output, dtype, *x);
  } else {
    ctx.setOutputType(output, dtype);
  }
}

// The quantized type: y_zero_point's, else output_dtype (opset 21+), else uint8.
DataType quantizedOutputType(const InferContext& ctx) {
  const auto attrType = static_cast<DataType>(ctx.opset() >= 21 ? attrInt(ctx.node(), "output_dtype", 0) : 0);
  if (ctx.hasInput(2)) {
    const DataType zp = ctx.inputType(2);
    if (attrType != DataType::kUndefined && attrType != zp) {
      ctx.fail("output_dtype " + dataTypeName(attrType) + " differs from y_zero_point's type " + dataTypeName(zp));
    }
    return zp;
  }
  return attrType == DataType::kUndefined ? DataType::kUint8 : attrType;
}

void inferQuantizeLinear(InferContext& ctx) {
  ctx.requireInput(0);
  ctx.requireInput(1);
  const DataType x = ctx.inputType(0);
  if (x != DataType::kInt32 && !(isFloatingPoint(x) && x != DataType::kFloat64 && (ctx.opset() >= 19 || x == DataType::kFloat32))) {
    ctx.fail("x cannot be " + dataTypeName(x), ErrorCode::kUnsupportedNode);
  }
  if (!(ctx.opset() >= 23 && ctx.inputType(1) == DataType::kInt32)) requireScaleType(ctx, 1);
  if (ctx.opset() >= 19 && ctx.opset() < 23 && ctx.inputType(1) != x) {
    ctx.fail("y_scale type " + dataTypeName(ctx.inputType(1)) + " differs from x's " + dataTypeName(x));
  }
  if (ctx.opset() >= 23) {
    const auto precision = static_cast<DataType>(attrInt(ctx.node(), "precision", 0));
    if (precision != DataType::kUndefined && (!isFloatingPoint(precision) || precision == DataType::kFloat64)) {
      ctx.fail("precision " + dataTypeName(precision) + " is not float, float16 or bfloat16", ErrorCode::kUnsupportedNode);
    }
  }
  const DataType y = quantizedOutputType(ctx);
  if (!isQuantizedType(y, ctx.opset())) {
    ctx.fail("quantizing to " + dataTypeName(y) + " is not supported at opset " + std::to_string(ctx.opset()),
             ErrorCode::kUnsupportedNode);
  }
  checkLayout(ctx);
  setLikeInput0(ctx, 0, y);
}

void inferDequantizeLinear(InferContext& ctx) {
  ctx.requireInput(0);
  ctx.requireInput(1);
  const DataType x = ctx.inputType(0);
  if (x != DataType::kInt32 && !isQuantizedType(x, ctx.opset())) {
    ctx.fail("dequantizing " + dataTypeName(x) + " is not supported at opset " + std::to_string(ctx.opset()),
             ErrorCode::kUnsupportedNode);
  }
  if (ctx.hasInput(2) && ctx.inputType(2) != x) {
    ctx.fail("x_zero_point type " + dataTypeName(ctx.inputType(2)) + " differs from x's " + dataTypeName(x));
  }
  requireScaleType(ctx, 1);
  DataType y = ctx.inputType(1);
  if (ctx.opset() >= 23) {
    const auto attrType = static_cast<DataType>(attrInt(ctx.node(), "output_dtype", 0));
    if (attrType != DataType::kUndefined) {
      if (!isFloatingPoint(attrType) || attrType == DataType::kFloat64) {
        ctx.fail("output_dtype " + dataTypeName(attrType) + " is not float, float16 or bfloat16");
      }
      y = attrType;
    }
  }
  checkLayout(ctx);
  setLikeInput0(ctx, 0, y);
}

// y (uint8, x's shape), y_scale (float scalar), y_zero_point (uint8 scalar).
void inferDynamicQuantizeLinear(InferContext& ctx) {
  ctx.requireInput(0);
  if (ctx.inputType(0) != DataType::kFloat32) {
    ctx.fail("x must be float, got " + dataTypeName(ctx.inputType(0)), ErrorCode::kUnsupportedNode);
  }
  setLikeInput0(ctx, 0, DataType::kUint8);
  ctx.setOutput(1, DataType::kFloat32, SymShape{});
  ctx.setOutput(2, DataType::kUint8, SymShape{});
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "QuantizeLinear", 10, 1000, inferQuantizeLinear});
KILN_REGISTER_OP_SCHEMA({"", "DequantizeLinear", 10, 1000, inferDequantizeLinear});
KILN_REGISTER_OP_SCHEMA({"", "DynamicQuantizeLinear", 11, 1000, inferDynamicQuantizeLinear});

}  // namespace kiln::ir
