// Shape and type rules of QuantizeLinear, DequantizeLinear (opsets 10, 13 per-axis, 19 float16
// scales, 21 blocked + 16-bit types, 23 output_dtype / precision) and DynamicQuantizeLinear.
#include "ir/ops/quantize_layout.h"
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

// The quantized types and the opset that introduced each.
bool isQuantizedType(DataType t, int64_t opset) {
  switch (t) {
    case DataType::kInt8:
    case DataType::kUint8:
      return true;
    case DataType::kFloat8E4M3FN:
    case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ:
      return opset >= 19;
    case DataType::kInt16:
    case DataType::kUint16:
    case DataType::kInt4:
    case DataType::kUint4:
      return opset >= 21;
    case DataType::kFloat4E2M1:
      return opset >= 23;
    case DataType::kInt2:
    case DataType::kUint2:
      return opset >= 25;
    default:
      return false;
  }
}

bool isWideFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

// Scales are float before opset 19, then float, float16 or bfloat16 (QuantizeLinear 23 adds int32,
// opset 24 float8e8m0).
void requireScaleType(const InferContext& ctx, size_t input) {
  const DataType t = ctx.inputType(input);
  const bool ok = ctx.opset() < 19
                      ? t == DataType::kFloat32
                      : isWideFloat(t) || (ctx.opset() >= 24 && t == DataType::kFloat8E8M0);
  if (!ok)
    ctx.fail("input " + std::to_string(input) + " (scale) cannot be " + dataTypeName(t),
             ErrorCode::kUnsupportedNode);
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
  const auto attrType =
      static_cast<DataType>(ctx.opset() >= 21 ? attrInt(ctx.node(), "output_dtype", 0) : 0);
  if (ctx.hasInput(2)) {
    const DataType zp = ctx.inputType(2);
    if (attrType != DataType::kUndefined && attrType != zp) {
      ctx.fail("output_dtype " + dataTypeName(attrType) + " differs from y_zero_point's type " +
               dataTypeName(zp));
    }
    return zp;
  }
  return attrType == DataType::kUndefined ? DataType::kUint8 : attrType;
}

void inferQuantizeLinear(InferContext& ctx) {
  ctx.requireInput(0);
  ctx.requireInput(1);
  const DataType x = ctx.inputType(0);
  if (x != DataType::kInt32 &&
      !(isWideFloat(x) && (ctx.opset() >= 19 || x == DataType::kFloat32))) {
    ctx.fail("x cannot be " + dataTypeName(x), ErrorCode::kUnsupportedNode);
  }
  if (!(ctx.opset() >= 23 && ctx.inputType(1) == DataType::kInt32)) requireScaleType(ctx, 1);
  if (ctx.opset() >= 19 && ctx.opset() < 23 && ctx.inputType(1) != x) {
    ctx.fail("y_scale type " + dataTypeName(ctx.inputType(1)) + " differs from x's " +
             dataTypeName(x));
  }
  if (ctx.opset() >= 23) {
    const auto precision = static_cast<DataType>(attrInt(ctx.node(), "precision", 0));
    if (precision != DataType::kUndefined && !isWideFloat(precision)) {
      ctx.fail("precision " + dataTypeName(precision) + " is not float, float16 or bfloat16",
               ErrorCode::kUnsupportedNode);
    }
  }
  const DataType y = quantizedOutputType(ctx);
  if (!isQuantizedType(y, ctx.opset())) {
    ctx.fail("quantizing to " + dataTypeName(y) + " is not supported at opset " +
                 std::to_string(ctx.opset()),
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
    ctx.fail("dequantizing " + dataTypeName(x) + " is not supported at opset " +
                 std::to_string(ctx.opset()),
             ErrorCode::kUnsupportedNode);
  }
  if (ctx.hasInput(2) && ctx.inputType(2) != x) {
    ctx.fail("x_zero_point type " + dataTypeName(ctx.inputType(2)) + " differs from x's " +
             dataTypeName(x));
  }
  requireScaleType(ctx, 1);
  DataType y = ctx.inputType(1);
  if (ctx.opset() >= 23) {
    const auto attrType = static_cast<DataType>(attrInt(ctx.node(), "output_dtype", 0));
    if (attrType != DataType::kUndefined) {
      if (!isWideFloat(attrType)) {
        ctx.fail("output_dtype " + dataTypeName(attrType) + " is not float, float16 or bfloat16");
      }
      y = attrType;
    }
  }
  if (!isWideFloat(y)) {
    ctx.fail("x_scale is " + dataTypeName(y) +
                 ", so output_dtype must name the output type (float, float16 or bfloat16)",
             ErrorCode::kUnsupportedNode);
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
