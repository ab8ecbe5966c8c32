// Shape and type rules of elementwise operators.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferUnaryFloat(InferContext& ctx) {
  if (!isFloatingPoint(ctx.inputType(0))) ctx.fail("expects a floating-point input, got " + dataTypeName(ctx.inputType(0)), ErrorCode::kUnsupportedNode);
  inferSameAsInput0(ctx);
}

void inferUnaryNumeric(InferContext& ctx) {
  DataType t = ctx.inputType(0);
  if (t == DataType::kString || t == DataType::kBool) ctx.fail("does not accept " + dataTypeName(t), ErrorCode::kUnsupportedNode);
  inferSameAsInput0(ctx);
}

void inferBinaryNumeric(InferContext& ctx) {
  if (ctx.hasInput(1) && ctx.inputType(0) != ctx.inputType(1)) {
    ctx.fail("input types differ: " + dataTypeName(ctx.inputType(0)) + " and " + dataTypeName(ctx.inputType(1)));
  }
  inferBroadcast(ctx);
}

}  // namespace

#define UNARY_FLOAT(op) KILN_REGISTER_OP_SCHEMA({"", op, 1, 1000, inferUnaryFloat})
UNARY_FLOAT("Relu");
UNARY_FLOAT("Sigmoid");
UNARY_FLOAT("Tanh");
UNARY_FLOAT("Exp");
UNARY_FLOAT("Log");
UNARY_FLOAT("Sqrt");
UNARY_FLOAT("Reciprocal");
UNARY_FLOAT("Erf");
UNARY_FLOAT("Softplus");
UNARY_FLOAT("Softsign");
UNARY_FLOAT("Floor");
UNARY_FLOAT("Ceil");
UNARY_FLOAT("Round");
UNARY_FLOAT("Sin");
UNARY_FLOAT("Cos");
UNARY_FLOAT("Tan");
UNARY_FLOAT("Asin");
UNARY_FLOAT("Acos");
UNARY_FLOAT("Atan");
UNARY_FLOAT("Sinh");
UNARY_FLOAT("Cosh");
UNARY_FLOAT("Asinh");
UNARY_FLOAT("Acosh");
UNARY_FLOAT("Atanh");
UNARY_FLOAT("LeakyRelu");
UNARY_FLOAT("Elu");
UNARY_FLOAT("Selu");
UNARY_FLOAT("Celu");
UNARY_FLOAT("HardSigmoid");
UNARY_FLOAT("HardSwish");
UNARY_FLOAT("ThresholdedRelu");
UNARY_FLOAT("Mish");
UNARY_FLOAT("Gelu");
#undef UNARY_FLOAT

KILN_REGISTER_OP_SCHEMA({"", "Neg", 1, 1000, inferUnaryNumeric});
KILN_REGISTER_OP_SCHEMA({"", "Abs", 1, 1000, inferUnaryNumeric});
KILN_REGISTER_OP_SCHEMA({"", "Sign", 9, 1000, inferUnaryNumeric});

KILN_REGISTER_OP_SCHEMA({"", "Add", 7, 1000, inferBinaryNumeric});
KILN_REGISTER_OP_SCHEMA({"", "Sub", 7, 1000, inferBinaryNumeric});
KILN_REGISTER_OP_SCHEMA({"", "Mul", 7, 1000, inferBinaryNumeric});
KILN_REGISTER_OP_SCHEMA({"", "Div", 7, 1000, inferBinaryNumeric});
// Pow's exponent may have another type than its base (opset 12+).
KILN_REGISTER_OP_SCHEMA({"", "Pow", 7, 1000, inferBroadcast});

}  // namespace kiln::ir
