// Shape and type rules of elementwise operators.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferUnaryFloat(InferContext& ctx) {
  if (!isFloatingPoint(ctx.inputType(0)))
    ctx.fail("expects a floating-point input, got " + dataTypeName(ctx.inputType(0)),
             ErrorCode::kUnsupportedNode);
  inferSameAsInput0(ctx);
}

void inferUnaryNumeric(InferContext& ctx) {
  DataType t = ctx.inputType(0);
  if (t == DataType::kString || t == DataType::kBool)
    ctx.fail("does not accept " + dataTypeName(t), ErrorCode::kUnsupportedNode);
  inferSameAsInput0(ctx);
}

void inferBinaryNumeric(InferContext& ctx) {
  if (ctx.hasInput(1) && ctx.inputType(0) != ctx.inputType(1)) {
    ctx.fail("input types differ: " + dataTypeName(ctx.inputType(0)) + " and " +
             dataTypeName(ctx.inputType(1)));
  }
  inferBroadcast(ctx);
}

// Add/Sub/Mul/Div. Before opset 7 they broadcast only B onto A (attributes broadcast, axis), so
// the output has A's shape; the kernel checks the exact alignment.
void inferArithmetic(InferContext& ctx) {
  if (ctx.opset() >= 7) {
    inferBinaryNumeric(ctx);
    return;
  }
  if (ctx.inputType(0) != ctx.inputType(1)) {
    ctx.fail("input types differ: " + dataTypeName(ctx.inputType(0)) + " and " +
             dataTypeName(ctx.inputType(1)));
  }
  inferSameAsInput0(ctx);
}

// PRelu: slope broadcasts unidirectionally onto X.
void inferPRelu(InferContext& ctx) {
  if (ctx.inputType(0) != ctx.inputType(1)) {
    ctx.fail("slope type " + dataTypeName(ctx.inputType(1)) + " differs from X type " +
             dataTypeName(ctx.inputType(0)));
  }
  const SymShape* x = ctx.inputShape(0);
  const SymShape* slope = ctx.inputShape(1);
  // PRelu-1/6 (old PyTorch exports) may give one slope per channel (axis 1); the kernel handles it.
  const bool legacyChannelSlope =
      ctx.opset() < 7 && slope && slope->size() == 1 && x && x->size() >= 2;
  if (x && slope && !legacyChannelSlope) {
    if (slope->size() > x->size()) ctx.fail("slope has a higher rank than X");
    for (size_t i = 0; i < slope->size(); ++i) {
      const Dim& s = (*slope)[i];
      const Dim& d = (*x)[i + x->size() - slope->size()];
      if (s.isKnown() && d.isKnown() && s.value != 1 && s.value != d.value) {
        ctx.fail("slope shape " + symShapeToString(*slope) + " does not broadcast to X shape " +
                 symShapeToString(*x));
      }
    }
  }
  inferUnaryNumeric(ctx);
}

// Clip: optional min/max inputs (opset 11+) must be scalars of the input's type.
void inferClip(InferContext& ctx) {
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.hasInput(i)) continue;
    if (ctx.inputType(i) != ctx.inputType(0)) {
      ctx.fail("input " + std::to_string(i) + " has type " + dataTypeName(ctx.inputType(i)) +
               ", expected " + dataTypeName(ctx.inputType(0)));
    }
    const SymShape* s = ctx.inputShape(i);
    if (s && !s->empty() && !(s->size() == 1 && (!(*s)[0].isKnown() || (*s)[0].value == 1))) {
      ctx.fail("input " + std::to_string(i) + " must be a scalar, got shape " +
               symShapeToString(*s));
    }
  }
  inferUnaryNumeric(ctx);
}

}  // namespace

#define UNARY_FLOAT(op) KILN_REGISTER_OP_SCHEMA({"", op, 1, 1000, inferUnaryFloat})
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

KILN_REGISTER_OP_SCHEMA({"", "Relu", 1, 1000, inferUnaryNumeric});
KILN_REGISTER_OP_SCHEMA({"", "Neg", 1, 1000, inferUnaryNumeric});
KILN_REGISTER_OP_SCHEMA({"", "Abs", 1, 1000, inferUnaryNumeric});
KILN_REGISTER_OP_SCHEMA({"", "Sign", 9, 1000, inferUnaryNumeric});
KILN_REGISTER_OP_SCHEMA({"", "Shrink", 9, 1000, inferUnaryNumeric});

KILN_REGISTER_OP_SCHEMA({"", "Add", 1, 1000, inferArithmetic});
KILN_REGISTER_OP_SCHEMA({"", "Sub", 1, 1000, inferArithmetic});
KILN_REGISTER_OP_SCHEMA({"", "Mul", 1, 1000, inferArithmetic});
KILN_REGISTER_OP_SCHEMA({"", "Div", 1, 1000, inferArithmetic});
KILN_REGISTER_OP_SCHEMA({"", "Mod", 10, 1000, inferBinaryNumeric});
// Pow's exponent may have another type than its base (opset 12+); the output has the base's type.
KILN_REGISTER_OP_SCHEMA({"", "Pow", 7, 1000, inferBroadcast});
KILN_REGISTER_OP_SCHEMA({"", "PRelu", 1, 1000, inferPRelu});
KILN_REGISTER_OP_SCHEMA({"", "Clip", 1, 1000, inferClip});

}  // namespace kiln::ir
