// kiln-internal quantized operators (domain "kiln", opset 1) that opt/fuse_qdq_elementwise.cpp
// makes of DQ -> op -> Q in QDQ models, with com.microsoft's QLinear* inputs; every scale and zero
// point is one value (an omitted zero point is 0), and the output's dtype is its zero point's
// (X's):
//   QLinearAdd(A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point) -> C
//   QLinearMul(the same inputs) -> C                                    A and B broadcast as numpy
//   QLinearGlobalAveragePool(X, x_scale, x_zero_point, y_scale, y_zero_point) -> Y   X [N, C, ...],
//   Y [N, C, 1, ...]
//   QLinearLookup(X, table) -> Y      Y[i] = table[X[i] - lowest of X's type], table 256 values of
//   Y's type (what opt/fuse_qdq_lookup.cpp computes of DQ -> activation -> Q)
//   QLinearConcat(Y_scale, Y_zero_point, X0, X0_scale, X0_zero_point, X1, ...) -> Y   as
//   com.microsoft's (attribute axis)
// and, in the com.microsoft domain only (what ONNX Runtime's quantizer writes), QLinearSigmoid and
// QLinearLeakyRelu(X, X_scale, X_zero_point, Y_scale, Y_zero_point) -> Y of X's shape and type,
// QLinearAveragePool and QLinearSoftmax (the same inputs), QLinearConcat and QLinearWhere.
// Each computes what DequantizeLinear, the float op and QuantizeLinear compute (docs/precision.md).
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void requireQuantized(const InferContext& ctx, size_t data, size_t scale, size_t zeroPoint) {
  for (size_t i : {data, scale}) ctx.requireInput(i);
  for (size_t i : {data, zeroPoint}) {
    if (!ctx.hasInput(i)) continue;  // an omitted zero point is 0
    const DataType t = ctx.inputType(i);
    if (t != DataType::kInt8 && t != DataType::kUint8) {
      ctx.fail("input " + std::to_string(i) + " must be int8 or uint8, got " + dataTypeName(t));
    }
  }
  if (ctx.hasInput(zeroPoint) && ctx.inputType(data) != ctx.inputType(zeroPoint)) {
    ctx.fail("input " + std::to_string(data) + " and its zero point (input " +
             std::to_string(zeroPoint) + ") differ in type");
  }
  if (ctx.inputType(scale) != DataType::kFloat32)
    ctx.fail("scale input " + std::to_string(scale) + " must be float32");
}

// The output's dtype: its zero point's (int8 or uint8; X's when it is omitted), beside a float32
// scale.
DataType outputType(const InferContext& ctx, size_t scale, size_t zeroPoint) {
  ctx.requireInput(scale);
  if (ctx.inputType(scale) != DataType::kFloat32)
    ctx.fail("output scale (input " + std::to_string(scale) + ") must be float32");
  const DataType out = ctx.inputType(ctx.hasInput(zeroPoint) ? zeroPoint : 0);
  if (out != DataType::kInt8 && out != DataType::kUint8) {
    ctx.fail("output zero point (input " + std::to_string(zeroPoint) +
             ") must be int8 or uint8, got " + dataTypeName(out));
  }
  return out;
}

void inferQLinearBinary(InferContext& ctx) {
  requireQuantized(ctx, 0, 1, 2);
  requireQuantized(ctx, 3, 4, 5);
  const DataType out = outputType(ctx, 6, 7);
  const SymShape* a = ctx.inputShape(0);
  const SymShape* b = ctx.inputShape(3);
  if (a && b) {
    ctx.setOutput(0, out, broadcastSymShapes(ctx, *a, *b));
  } else {
    ctx.setOutputType(0, out);
  }
}

// channels_last = 1: X is [N, spatial..., C] and Y [N, 1..., C].
void inferQLinearGlobalAveragePool(InferContext& ctx) {
  const int64_t channelsLast = attrInt(ctx.node(), "channels_last", 0);
  if (channelsLast != 0 && channelsLast != 1)
    ctx.fail("channels_last must be 0 or 1, got " + std::to_string(channelsLast));
  requireQuantized(ctx, 0, 1, 2);
  const DataType out = outputType(ctx, 3, 4);
  const SymShape* x = ctx.inputShape(0);
  if (!x) return ctx.setOutputType(0, out);
  if (x->size() < 3) {
    ctx.fail("X must have rank 3 or more (" +
             std::string(channelsLast ? "[N, ..., C]" : "[N, C, ...]") + "), got " +
             symShapeToString(*x));
  }
  SymShape y(x->size(), Dim::known(1));
  y.front() = x->front();
  y[channelsLast ? x->size() - 1 : 1] = (*x)[channelsLast ? x->size() - 1 : 1];
  ctx.setOutput(0, out, y);
}

// com.microsoft QLinearSigmoid / QLinearLeakyRelu: X, X_scale, [X_zero_point], Y_scale,
// [Y_zero_point].
void inferQLinearUnary(InferContext& ctx) {
  requireQuantized(ctx, 0, 1, 2);
  const DataType out = outputType(ctx, 3, 4);
  if (out != ctx.inputType(0))
    ctx.fail("Y_zero_point must have X's type " + dataTypeName(ctx.inputType(0)));
  const SymShape* x = ctx.inputShape(0);
  if (x) {
    ctx.setOutput(0, out, *x);
  } else {
    ctx.setOutputType(0, out);
  }
}

// kiln QLinearLookup: X int8 / uint8, table 256 values of int8 / uint8 (Y's type), Y X's shape.
void inferQLinearLookup(InferContext& ctx) {
  for (size_t i : {0, 1}) {
    ctx.requireInput(i);
    const DataType t = ctx.inputType(i);
    if (t != DataType::kInt8 && t != DataType::kUint8)
      ctx.fail("input " + std::to_string(i) + " must be int8 or uint8, got " + dataTypeName(t));
  }
  const SymShape* table = ctx.inputShape(1);
  if (table && (table->size() != 1 || (*table)[0].isKnown() && (*table)[0].value != 256))
    ctx.fail("table must have shape [256], got " + symShapeToString(*table));
  const SymShape* x = ctx.inputShape(0);
  if (x) {
    ctx.setOutput(0, ctx.inputType(1), *x);
  } else {
    ctx.setOutputType(0, ctx.inputType(1));
  }
}

void setQuantizedOutput(InferContext& ctx, DataType out, const TypeInfo& shaped) {
  if (shaped.shape) {
    ctx.setOutput(0, out, *shaped.shape);
  } else {
    ctx.setOutputType(0, out);
  }
}

void refuseChannelsLast(const InferContext& ctx) {
  if (attrInt(ctx.node(), "channels_last", 0) != 0) {
    ctx.fail("attribute 'channels_last' = 1 is not supported (X must be [N, C, ...])",
             ErrorCode::kUnsupportedNode);
  }
}

// com.microsoft QLinearAveragePool: AveragePool's attributes and shape rule.
void inferQLinearAveragePool(InferContext& ctx) {
  refuseChannelsLast(ctx);
  requireQuantized(ctx, 0, 1, 2);
  setQuantizedOutput(ctx, outputType(ctx, 3, 4),
                     inferThroughOp(ctx, "AveragePool", 19, {0}, {DataType::kFloat32}));
}

// com.microsoft QLinearSoftmax: X's shape; "opset" names the Softmax semantics (13+: one axis).
void inferQLinearSoftmax(InferContext& ctx) {
  requireQuantized(ctx, 0, 1, 2);
  if (!hasAttr(ctx.node(), "opset")) ctx.fail("attribute 'opset' is required");
  setQuantizedOutput(ctx, outputType(ctx, 3, 4),
                     inferThroughOp(ctx, "Softmax", 13, {0}, {DataType::kFloat32}));
}

// com.microsoft QLinearConcat(Y_scale, Y_zero_point, X0, X0_scale, X0_zero_point, X1, ...).
void inferQLinearConcat(InferContext& ctx) {
  ctx.requireInput(1);
  if (ctx.numInputs() < 5 || (ctx.numInputs() - 2) % 3 != 0) {
    ctx.fail("inputs must be Y_scale, Y_zero_point and then (X, X_scale, X_zero_point) triples");
  }
  std::vector<size_t> picks;
  for (size_t i = 2; i < ctx.numInputs(); i += 3) {
    requireQuantized(ctx, i, i + 1, i + 2);
    picks.push_back(i);
  }
  setQuantizedOutput(ctx, outputType(ctx, 0, 1),
                     inferThroughOp(ctx, "Concat", 13, picks,
                                    std::vector<DataType>(picks.size(), DataType::kUint8)));
}

// com.microsoft QLinearWhere(condition, X, x_scale, x_zero_point, Y, y_scale, y_zero_point,
// z_scale, z_zero_point).
void inferQLinearWhere(InferContext& ctx) {
  requireQuantized(ctx, 1, 2, 3);
  requireQuantized(ctx, 4, 5, 6);
  ctx.requireInput(8);
  setQuantizedOutput(ctx, outputType(ctx, 7, 8),
                     inferThroughOp(ctx, "Where", 16, {0, 1, 4},
                                    {DataType::kBool, DataType::kUint8, DataType::kUint8}));
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"kiln", "QLinearAdd", 1, 1000, inferQLinearBinary});
KILN_REGISTER_OP_SCHEMA({"kiln", "QLinearMul", 1, 1000, inferQLinearBinary});
KILN_REGISTER_OP_SCHEMA({"kiln", "QLinearGlobalAveragePool", 1, 1000,
                         inferQLinearGlobalAveragePool});
KILN_REGISTER_OP_SCHEMA({"kiln", "QLinearLookup", 1, 1000, inferQLinearLookup});
KILN_REGISTER_OP_SCHEMA({"kiln", "QLinearConcat", 1, 1000, inferQLinearConcat});
// The same ops as ONNX Runtime's quantizer writes them (QOperator format), zero points optional.
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QLinearAdd", 1, 1000, inferQLinearBinary});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QLinearMul", 1, 1000, inferQLinearBinary});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QLinearGlobalAveragePool", 1, 1000,
                         inferQLinearGlobalAveragePool});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QLinearSigmoid", 1, 1000, inferQLinearUnary});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QLinearLeakyRelu", 1, 1000, inferQLinearUnary});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QLinearAveragePool", 1, 1000, inferQLinearAveragePool});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QLinearSoftmax", 1, 1000, inferQLinearSoftmax});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QLinearConcat", 1, 1000, inferQLinearConcat});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QLinearWhere", 1, 1000, inferQLinearWhere});

}  // namespace kiln::ir
