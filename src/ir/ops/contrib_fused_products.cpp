// Shape and type rules of the products ONNX Runtime's graph optimizer saves in "optimized" models
// (com.microsoft version 1, float32):
//   FusedGemm(A, B, [C]) -> Y = activation(Gemm(A, B, C)): Gemm's attributes plus "activation"
//     (Relu, LeakyRelu, Sigmoid, HardSigmoid) and "activation_alpha" / "activation_beta"
//   FusedMatMul(A, B) -> Y = alpha * op(A) x op(B), op transposing the last two dimensions of A
//     ("transA") or B ("transB"); transBatchA / transBatchB are not supported
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void requireFloat32Inputs(const InferContext& ctx, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (ctx.hasInput(i) && ctx.inputType(i) != DataType::kFloat32) {
      ctx.fail("input " + std::to_string(i) +
                   " must be float32 (kiln implements this contrib op for float32), got " +
                   dataTypeName(ctx.inputType(i)),
               ErrorCode::kUnsupportedNode);
    }
  }
}

void setOutputFrom(InferContext& ctx, const TypeInfo& t) {
  if (t.shape) {
    ctx.setOutput(0, DataType::kFloat32, *t.shape);
  } else {
    ctx.setOutputType(0, DataType::kFloat32);
  }
}

void inferFusedGemm(InferContext& ctx) {
  requireFloat32Inputs(ctx, 3);
  const std::string activation = attrString(ctx.node(), "activation", "");
  if (activation != "Relu" && activation != "LeakyRelu" && activation != "Sigmoid" &&
      activation != "HardSigmoid") {
    ctx.fail("attribute 'activation' = '" + activation +
                 "' is not supported (Relu, LeakyRelu, Sigmoid, HardSigmoid)",
             ErrorCode::kUnsupportedNode);
  }
  setOutputFrom(ctx, inferThroughOp(ctx, "Gemm", 13, {0, 1, 2}));
}

// The shape with its last two dimensions swapped (ranks below 2 unchanged).
SymShape swapLastTwo(SymShape s) {
  if (s.size() >= 2) std::swap(s[s.size() - 1], s[s.size() - 2]);
  return s;
}

void inferFusedMatMul(InferContext& ctx) {
  ctx.requireInput(0);
  ctx.requireInput(1);
  requireFloat32Inputs(ctx, 2);
  for (const char* attr : {"transBatchA", "transBatchB"}) {
    if (attrInt(ctx.node(), attr, 0) != 0) {
      ctx.fail(std::string("attribute '") + attr + "' = 1 is not supported",
               ErrorCode::kUnsupportedNode);
    }
  }
  const bool transA = attrInt(ctx.node(), "transA", 0) != 0,
             transB = attrInt(ctx.node(), "transB", 0) != 0;
  const SymShape* a = ctx.inputShape(0);
  const SymShape* b = ctx.inputShape(1);
  if ((transA && a && a->size() < 2) || (transB && b && b->size() < 2))
    ctx.fail("a transposed operand must have rank 2 or more");
  std::vector<TypeInfo> types{
      {DataType::kFloat32, a ? std::optional(transA ? swapLastTwo(*a) : *a) : std::nullopt},
      {DataType::kFloat32, b ? std::optional(transB ? swapLastTwo(*b) : *b) : std::nullopt}};
  const OpSchema* matmul = OpSchemaRegistry::global().find("", "MatMul", 13);
  if (!matmul) ctx.fail("needs the MatMul shape rule (internal error)");
  std::vector<TypeInfo> outputs(1);
  InferContext inner(ctx.node(), {&types[0], &types[1]}, {nullptr, nullptr}, outputs);
  matmul->infer(inner);
  setOutputFrom(ctx, outputs[0]);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "FusedGemm", 1, 1000, inferFusedGemm});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "FusedMatMul", 1, 1000, inferFusedMatMul});
// TransposeMatMul is FusedMatMul's older name (without transBatchA / transBatchB).
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "TransposeMatMul", 1, 1000, inferFusedMatMul});

}  // namespace kiln::ir
