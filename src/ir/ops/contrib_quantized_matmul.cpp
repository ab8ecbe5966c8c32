// Shape and type rules of ONNX Runtime's dynamic-quantization products (com.microsoft, version 1),
// which its quantizer (quantize_dynamic) writes for MatMul:
//   MatMulIntegerToFloat(A, B, a_scale, b_scale, [a_zero_point], [b_zero_point], [bias]) -> Y
//     Y = a_scale * b_scale[n] * ((A - a_zp) x (B - b_zp[n])) + bias[n], A and B 8-bit, Y float32
//   DynamicQuantizeMatMul(A, B, b_scale, [b_zero_point], [bias]) -> Y
//     the same with float A quantized first as DynamicQuantizeLinear does (uint8, per tensor)
//   MatMulInteger16(A, B) -> Y: int16 operands, their int32 product (no zero points)
// All multiply as MatMulInteger (numpy matmul broadcasting), whose shape rule they use.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

constexpr size_t kOmitted =
    1000;  // a pick past the node's inputs: MatMulInteger sees no input there

void requireFloat32(const InferContext& ctx, size_t i, const char* name) {
  if (ctx.hasInput(i) && ctx.inputType(i) != DataType::kFloat32) {
    ctx.fail(std::string(name) + " must be float32, got " + dataTypeName(ctx.inputType(i)),
             ErrorCode::kUnsupportedNode);
  }
}

// Output 0: the MatMulInteger shape of the picks, float32; bias (if any) one value per column.
void setProductOutput(InferContext& ctx, const std::vector<size_t>& picks,
                      const std::vector<DataType>& dtypes, size_t bias) {
  requireFloat32(ctx, bias, "bias");
  const TypeInfo integer = inferThroughOp(ctx, "MatMulInteger", 10, picks, dtypes);
  if (!integer.shape) return ctx.setOutputType(0, DataType::kFloat32);
  const SymShape* b = ctx.hasInput(bias) ? ctx.inputShape(bias) : nullptr;
  if (b && !integer.shape->empty()) {
    const Dim n = integer.shape->back();
    if (b->size() != 1 || ((*b)[0].isKnown() && n.isKnown() && (*b)[0].value != n.value)) {
      ctx.fail("bias must be 1-D with one value per output column (" + n.toString() + "), got " +
               symShapeToString(*b));
    }
  }
  ctx.setOutput(0, DataType::kFloat32, *integer.shape);
}

void inferMatMulIntegerToFloat(InferContext& ctx) {
  for (size_t i = 0; i < 4; ++i) ctx.requireInput(i);
  requireFloat32(ctx, 2, "a_scale");
  requireFloat32(ctx, 3, "b_scale");
  setProductOutput(ctx, {0, 1, 4, 5}, {}, 6);
}

void inferDynamicQuantizeMatMul(InferContext& ctx) {
  for (size_t i = 0; i < 3; ++i) ctx.requireInput(i);
  requireFloat32(ctx, 0, "A");
  requireFloat32(ctx, 2, "b_scale");
  setProductOutput(ctx, {0, 1, kOmitted, 3}, {DataType::kUint8}, 4);
}

void inferMatMulInteger16(InferContext& ctx) {
  for (size_t i = 0; i < 2; ++i) {
    ctx.requireInput(i);
    if (ctx.inputType(i) != DataType::kInt16) {
      ctx.fail("input " + std::to_string(i) + " must be int16 (onnxruntime's CPU kernel), got " +
                   dataTypeName(ctx.inputType(i)),
               ErrorCode::kUnsupportedNode);
    }
  }
  const TypeInfo integer =
      inferThroughOp(ctx, "MatMulInteger", 10, {0, 1}, {DataType::kInt8, DataType::kInt8});
  if (!integer.shape) return ctx.setOutputType(0, DataType::kInt32);
  ctx.setOutput(0, DataType::kInt32, *integer.shape);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "MatMulInteger16", 1, 1000, inferMatMulInteger16});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "MatMulIntegerToFloat", 1, 1000,
                         inferMatMulIntegerToFloat});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "DynamicQuantizeMatMul", 1, 1000,
                         inferDynamicQuantizeMatMul});

}  // namespace kiln::ir
