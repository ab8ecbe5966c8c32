// kiln-internal quantized operators (domain "kiln", opset 1), made from QDQ models by
// opt/fuse_qdq.cpp; docs/precision.md gives their arithmetic.
//   QConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, [y_scale], [y_zero_point], [B])
//     QLinearConv's inputs and attributes, plus FusedConv's "activation" / "activation_params",
//     applied to the real-valued result x_scale * w_scale[m] * (sum + B[m]) before it is
//     requantized at y_scale / y_zero_point. Without y_scale and y_zero_point the output is that
//     real value in float32 (a Conv whose result float ops read). "channels_last" = 1 (set by
//     opt/nhwc_int8_layout.cpp): X and Y are [N, H, W, C] instead of [N, C, H, W].
//   QGemm(A, a_scale, a_zero_point, B, b_scale, b_zero_point, [C], [y_scale], [y_zero_point])
//     com.microsoft QGemm: the real result alpha * a_scale * b_scale[n] * ((A - a_zp)(B' - b_zp) +
//     C[n]) with B' = B or B^T ("transB"; "transA" must be 0), A [..., M, K] (rows batched as
//     MatMul's), B a 2-D constant with b_scale / b_zero_point per tensor or per column n, C an
//     int32 [N] bias; then the activation attributes and the output as QConv's.
#include <algorithm>
#include <string>

#include "ir/node_attrs.h"
#include "ir/op_schema.h"

namespace kiln::ir {
namespace {

// The output dtype: y_zero_point's (int8 or uint8) when y_scale is given, float32 otherwise.
DataType quantizedOutputType(const InferContext& ctx, size_t yScale, size_t yZeroPoint) {
  if (ctx.hasInput(yScale) != ctx.hasInput(yZeroPoint)) {
    ctx.fail("y_scale and y_zero_point must be given together (both omitted: float32 output)");
  }
  if (!ctx.hasInput(yScale)) return DataType::kFloat32;
  if (ctx.inputType(yScale) != DataType::kFloat32) ctx.fail("y_scale must be float32");
  const DataType y = ctx.inputType(yZeroPoint);
  if (y != DataType::kInt8 && y != DataType::kUint8)
    ctx.fail("y_zero_point must be int8 or uint8, got " + dataTypeName(y));
  return y;
}

// QLinearConv's rule with the output type of quantizedOutputType; a float-output node is checked
// as if it had uint8 output parameters. channels_last = 1: X and Y are [N, spatial..., C].
void inferQConv(InferContext& ctx) {
  const int64_t channelsLast = attrInt(ctx.node(), "channels_last", 0);
  if (channelsLast != 0 && channelsLast != 1)
    ctx.fail("channels_last must be 0 or 1, got " + std::to_string(channelsLast));
  const DataType out = quantizedOutputType(ctx, 6, 7);
  const OpSchema* qlinear = OpSchemaRegistry::global().find("", "QLinearConv", 10);
  if (!qlinear) ctx.fail("needs the QLinearConv shape rule (internal error)");
  const TypeInfo yScale{DataType::kFloat32, SymShape{}}, yZeroPoint{DataType::kUint8, SymShape{}};
  std::vector<const TypeInfo*> types;
  std::vector<const Tensor*> values;
  for (size_t i = 0; i < 9; ++i) {
    const bool stands = (i == 6 || i == 7) && out == DataType::kFloat32;
    types.push_back(stands ? (i == 6 ? &yScale : &yZeroPoint)
                           : (ctx.hasInput(i) ? &ctx.inputTypeInfo(i) : nullptr));
    values.push_back(stands ? nullptr : ctx.inputValue(i));
  }
  TypeInfo xFirst;
  if (channelsLast && types[0] && types[0]->shape && types[0]->shape->size() >= 2) {
    xFirst = *types[0];
    std::rotate(xFirst.shape->begin() + 1, xFirst.shape->end() - 1, xFirst.shape->end());
    types[0] = &xFirst;
  }
  std::vector<TypeInfo> outputs(1);
  InferContext inner(ctx.node(), types, values, outputs);
  qlinear->infer(inner);
  if (channelsLast && outputs[0].shape && outputs[0].shape->size() >= 2) {
    std::rotate(outputs[0].shape->begin() + 1, outputs[0].shape->begin() + 2,
                outputs[0].shape->end());
  }
  if (outputs[0].shape) {
    ctx.setOutput(0, out, *outputs[0].shape);
  } else {
    ctx.setOutputType(0, out);
  }
}

void requireFloatScalar(const InferContext& ctx, size_t i, const char* name) {
  ctx.requireInput(i);
  if (ctx.inputType(i) != DataType::kFloat32) ctx.fail(std::string(name) + " must be float32");
}

void requireEightBit(const InferContext& ctx, size_t i, const char* name) {
  ctx.requireInput(i);
  const DataType t = ctx.inputType(i);
  if (t != DataType::kInt8 && t != DataType::kUint8)
    ctx.fail(std::string(name) + " must be int8 or uint8, got " + dataTypeName(t));
}

void inferQGemm(InferContext& ctx) {
  requireEightBit(ctx, 0, "A");
  requireFloatScalar(ctx, 1, "a_scale");
  requireEightBit(ctx, 2, "a_zero_point");
  requireEightBit(ctx, 3, "B");
  requireFloatScalar(ctx, 4, "b_scale");
  requireEightBit(ctx, 5, "b_zero_point");
  if (ctx.inputType(0) != ctx.inputType(2) || ctx.inputType(3) != ctx.inputType(5)) {
    ctx.fail("a zero point must have its operand's type (A and a_zero_point, B and b_zero_point)");
  }
  const DataType out = quantizedOutputType(ctx, 7, 8);
  if (attrInt(ctx.node(), "transA", 0) != 0)
    ctx.fail("transA must be 0 (A is [..., M, K])", ErrorCode::kUnsupportedNode);
  const bool transB = attrInt(ctx.node(), "transB", 0) != 0;
  const SymShape* a = ctx.inputShape(0);
  const SymShape* b = ctx.inputShape(3);
  if (b && b->size() != 2) ctx.fail("B must be 2-D, got " + symShapeToString(*b));
  if (a && a->size() < 2)
    ctx.fail("A must have rank 2 or more ([..., M, K]), got " + symShapeToString(*a));
  const Dim n = b ? (*b)[transB ? 0 : 1] : Dim::unknown();
  if (ctx.hasInput(6)) {
    if (ctx.inputType(6) != DataType::kInt32)
      ctx.fail("C must be int32, got " + dataTypeName(ctx.inputType(6)));
    const SymShape* c = ctx.inputShape(6);
    if (c && (c->size() != 1 || ((*c)[0].isKnown() && n.isKnown() && (*c)[0].value != n.value))) {
      ctx.fail("C must be 1-D with one value per output column (" + n.toString() + "), got " +
               symShapeToString(*c));
    }
  }
  if (!a || !b) {
    ctx.setOutputType(0, out);
    return;
  }
  const Dim k = (*b)[transB ? 1 : 0];
  if (a->back().isKnown() && k.isKnown() && a->back().value != k.value) {
    ctx.fail("A " + symShapeToString(*a) + " and B " + symShapeToString(*b) +
             (transB ? " (transposed)" : "") + " do not multiply: K differs");
  }
  SymShape y(a->begin(), a->end() - 1);
  y.push_back(n);
  ctx.setOutput(0, out, y);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"kiln", "QConv", 1, 1000, inferQConv});
KILN_REGISTER_OP_SCHEMA({"kiln", "QGemm", 1, 1000, inferQGemm});
// kiln::QGemm is com.microsoft's QGemm (what ONNX Runtime's quantizer writes for Gemm), extended.
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QGemm", 1, 1000, inferQGemm});

}  // namespace kiln::ir
