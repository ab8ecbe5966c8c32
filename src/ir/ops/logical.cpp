// Shape and type rules of comparisons, boolean logic, Where, NaN/Inf tests and bitwise operators.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void requireSameTypes(InferContext& ctx, size_t first, size_t last) {
  for (size_t i = first + 1; i <= last; ++i) {
    if (ctx.inputType(i) != ctx.inputType(first)) {
      ctx.fail("input types differ: " + dataTypeName(ctx.inputType(first)) + " and " +
               dataTypeName(ctx.inputType(i)));
    }
  }
}

// Less, Greater, LessOrEqual, GreaterOrEqual: numeric inputs of one type, bool output.
void inferOrderComparison(InferContext& ctx) {
  requireSameTypes(ctx, 0, 1);
  const DataType t = ctx.inputType(0);
  if (t == DataType::kString || t == DataType::kBool)
    ctx.fail("does not accept " + dataTypeName(t), ErrorCode::kUnsupportedNode);
  inferBroadcastBool(ctx);
}

// Equal also compares bools and strings.
void inferEquality(InferContext& ctx) {
  requireSameTypes(ctx, 0, 1);
  inferBroadcastBool(ctx);
}

void inferBoolLogic(InferContext& ctx) {
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    if (ctx.inputType(i) != DataType::kBool)
      ctx.fail("expects bool inputs, got " + dataTypeName(ctx.inputType(i)));
  }
  inferBroadcastBool(ctx);
}

void inferWhere(InferContext& ctx) {
  if (ctx.inputType(0) != DataType::kBool)
    ctx.fail("condition must be bool, got " + dataTypeName(ctx.inputType(0)));
  requireSameTypes(ctx, 1, 2);
  const DataType t = ctx.inputType(1);
  SymShape shape;
  for (size_t i = 0; i < 3; ++i) {
    const SymShape* s = ctx.inputShape(i);
    if (!s) {
      ctx.setOutputType(0, t);
      return;
    }
    shape = broadcastSymShapes(ctx, shape, *s);
  }
  ctx.setOutput(0, t, shape);
}

// IsNaN, IsInf: float input, bool output of the same shape.
void inferFloatTest(InferContext& ctx) {
  if (!isFloatingPoint(ctx.inputType(0))) {
    ctx.fail("expects a floating-point input, got " + dataTypeName(ctx.inputType(0)),
             ErrorCode::kUnsupportedNode);
  }
  const SymShape* s = ctx.inputShape(0);
  if (s)
    ctx.setOutput(0, DataType::kBool, *s);
  else
    ctx.setOutputType(0, DataType::kBool);
}

bool isInteger(DataType t) { return isSignedInteger(t) || isUnsignedInteger(t); }

void inferBitwiseBinary(InferContext& ctx) {
  requireSameTypes(ctx, 0, 1);
  if (!isInteger(ctx.inputType(0)))
    ctx.fail("expects integer inputs, got " + dataTypeName(ctx.inputType(0)),
             ErrorCode::kUnsupportedNode);
  inferBroadcast(ctx);
}

void inferBitShift(InferContext& ctx) {
  const std::string direction = attrString(ctx.node(), "direction");
  if (direction != "LEFT" && direction != "RIGHT")
    ctx.fail("attribute 'direction' must be LEFT or RIGHT, got '" + direction + "'");
  inferBitwiseBinary(ctx);
}

void inferBitwiseNot(InferContext& ctx) {
  if (!isInteger(ctx.inputType(0)))
    ctx.fail("expects an integer input, got " + dataTypeName(ctx.inputType(0)),
             ErrorCode::kUnsupportedNode);
  inferSameAsInput0(ctx);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "Equal", 7, 1000, inferEquality});
KILN_REGISTER_OP_SCHEMA({"", "Less", 7, 1000, inferOrderComparison});
KILN_REGISTER_OP_SCHEMA({"", "Greater", 7, 1000, inferOrderComparison});
KILN_REGISTER_OP_SCHEMA({"", "LessOrEqual", 12, 1000, inferOrderComparison});
KILN_REGISTER_OP_SCHEMA({"", "GreaterOrEqual", 12, 1000, inferOrderComparison});

KILN_REGISTER_OP_SCHEMA({"", "Not", 1, 1000, inferBoolLogic});
KILN_REGISTER_OP_SCHEMA({"", "And", 7, 1000, inferBoolLogic});
KILN_REGISTER_OP_SCHEMA({"", "Or", 7, 1000, inferBoolLogic});
KILN_REGISTER_OP_SCHEMA({"", "Xor", 7, 1000, inferBoolLogic});

KILN_REGISTER_OP_SCHEMA({"", "Where", 9, 1000, inferWhere});
KILN_REGISTER_OP_SCHEMA({"", "IsNaN", 9, 1000, inferFloatTest});
KILN_REGISTER_OP_SCHEMA({"", "IsInf", 10, 1000, inferFloatTest});

KILN_REGISTER_OP_SCHEMA({"", "BitShift", 11, 1000, inferBitShift});
KILN_REGISTER_OP_SCHEMA({"", "BitwiseAnd", 18, 1000, inferBitwiseBinary});
KILN_REGISTER_OP_SCHEMA({"", "BitwiseOr", 18, 1000, inferBitwiseBinary});
KILN_REGISTER_OP_SCHEMA({"", "BitwiseXor", 18, 1000, inferBitwiseBinary});
KILN_REGISTER_OP_SCHEMA({"", "BitwiseNot", 18, 1000, inferBitwiseNot});

}  // namespace kiln::ir
