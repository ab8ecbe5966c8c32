// Shape and type rules of QLinearMatMul and QLinearConv: the shape rules of MatMulInteger and
// ConvInteger applied to the quantized operands, with the type of y_zero_point as the output's.
#include <algorithm>

#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

// Scales are float (QLinearMatMul 21 also allows float16 and bfloat16, all three the same type).
void requireScales(const InferContext& ctx, std::initializer_list<size_t> inputs) {
  const DataType first = ctx.inputType(*inputs.begin());
  for (size_t i : inputs) {
    const DataType t = ctx.inputType(i);
    const bool ok =
        ctx.node().opType == "QLinearMatMul" && ctx.opset() >= 21
            ? (t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16)
            : t == DataType::kFloat32;
    if (!ok)
      ctx.fail("scale input " + std::to_string(i) + " cannot be " + dataTypeName(t),
               ErrorCode::kUnsupportedNode);
    if (t != first)
      ctx.fail("scale inputs differ in type: " + dataTypeName(first) + " and " + dataTypeName(t));
  }
}

// Runs the shape rule of `integerOp` on the inputs at `picks` (its inputs in order) and gives
// output 0 that shape with y_zero_point's (input 7's) type.
void inferThroughIntegerOp(InferContext& ctx, const char* integerOp,
                           const std::vector<size_t>& picks) {
  const TypeInfo integer =
      inferThroughOp(ctx, integerOp, std::max<int64_t>(ctx.opset(), 10), picks);
  const DataType y = ctx.inputType(7);
  if (y != DataType::kInt8 && y != DataType::kUint8) {
    ctx.fail("y_zero_point must be int8 or uint8, got " + dataTypeName(y),
             ErrorCode::kUnsupportedNode);
  }
  if (integer.shape) {
    ctx.setOutput(0, y, *integer.shape);
  } else {
    ctx.setOutputType(0, y);
  }
}

// a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
void inferQLinearMatMul(InferContext& ctx) {
  for (size_t i = 0; i < 8; ++i) ctx.requireInput(i);
  requireScales(ctx, {1, 4, 6});
  inferThroughIntegerOp(ctx, "MatMulInteger", {0, 3, 2, 5});
}

// x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, optional int32 B.
void inferQLinearConv(InferContext& ctx) {
  for (size_t i = 0; i < 8; ++i) ctx.requireInput(i);
  requireScales(ctx, {1, 4, 6});
  if (ctx.hasInput(8) && ctx.inputType(8) != DataType::kInt32) {
    ctx.fail("bias B must be int32, got " + dataTypeName(ctx.inputType(8)));
  }
  inferThroughIntegerOp(ctx, "ConvInteger", {0, 3, 2, 5});
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "QLinearMatMul", 10, 1000, inferQLinearMatMul});
KILN_REGISTER_OP_SCHEMA({"", "QLinearConv", 10, 1000, inferQLinearConv});

}  // namespace kiln::ir
