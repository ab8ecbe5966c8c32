// kiln-internal fused operators (domain "kiln", opset 1), made by the fusion passes in src/opt:
//   FusedConv(X, W, [B], [Z]) -> Y = act(Conv(X, W, B) + Z)        Conv's attributes, plus
//   FusedMatMul(A, B, [bias], [Z]) -> Y = act(A @ B + bias + Z)     "activation" (the replaced op's
//                                                                    name, "" = none) and
// "activation_params" (Clip min/max, LeakyRelu alpha, HardSigmoid alpha/beta). Z is shaped like Y.
//   FusedAttention(Q, K, V, [mask]) -> Y = softmax(scale * Q K^T + mask) V per batch and head, with
// Q [B, Sq, H, Dk], K [B, Sk, H, Dk], V [B, Sk, H, Dv] and Y [B, Sq, H, Dv] (heads split but not
// transposed, as a Linear layer's output reshaped), the float mask broadcasting to [B, H, Sq, Sk],
// and the "scale" attribute. Packed form: FusedAttention(QKV, "", "", [mask]) with QKV
// [B, S, 3 * H * D] holding Q, K and V side by side on each row and the "num_heads" attribute H.
#include "ir/op_schema.h"
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

// Runs the schema of the op this one extends, then checks the residual input against its output.
void inferExtending(InferContext& ctx, const char* baseOp, size_t residualInput) {
  const OpSchema* base = OpSchemaRegistry::global().find("", baseOp, 13);
  if (!base) ctx.fail(std::string("no schema for ") + baseOp);
  base->infer(ctx);
  if (!ctx.hasInput(residualInput)) return;
  // No broadcasting: the kernel checks that the residual's concrete shape equals Y's.
  if (ctx.inputType(residualInput) != ctx.inputType(0))
    ctx.fail("residual input type differs from X's");
}

void inferFusedMatMul(InferContext& ctx) {
  inferExtending(ctx, "MatMul", 3);
  if (!ctx.hasInput(2)) return;
  const SymShape* b = ctx.inputShape(1);
  const SymShape* bias = ctx.inputShape(2);
  if (bias &&
      (bias->size() != 1 || (b && !b->empty() && b->back().isKnown() && (*bias)[0].isKnown() &&
                             (*bias)[0].value != b->back().value))) {
    ctx.fail("bias must be 1-D with one value per output column");
  }
}

// Whether two dims may be equal: both known and equal, or either not known.
bool mayEqual(const Dim& a, const Dim& b) {
  return !a.isKnown() || !b.isKnown() || a.value == b.value;
}

// The packed form: one [B, S, 3 * H * D] input.
void inferPackedAttention(InferContext& ctx) {
  ctx.requireInput(0);
  if (ctx.inputType(0) != DataType::kFloat32) ctx.fail("QKV must be float32");
  const int64_t heads = attrInt(ctx.node(), "num_heads", 0);
  if (heads <= 0) ctx.fail("packed QKV needs a positive num_heads");
  const SymShape* qkv = ctx.inputShape(0);
  if (!qkv) {
    ctx.setOutputType(0, DataType::kFloat32);
    return;
  }
  if (qkv->size() != 3) ctx.fail("packed QKV must be 3-D [batch, length, 3 * heads * dim]");
  Dim dim = Dim::unknown();
  if ((*qkv)[2].isKnown()) {
    const int64_t qkvHeads = multiplyDims(ctx.node(), 3, heads, "3 * num_heads");
    if ((*qkv)[2].value % qkvHeads != 0)
      ctx.fail("packed QKV width " + (*qkv)[2].toString() + " is not 3 * num_heads * dim");
    dim = Dim::known((*qkv)[2].value / qkvHeads);
  }
  ctx.setOutput(0, DataType::kFloat32, SymShape{(*qkv)[0], (*qkv)[1], Dim::known(heads), dim});
}

void inferFusedAttention(InferContext& ctx) {
  if (ctx.hasInput(3) && ctx.inputType(3) != DataType::kFloat32) ctx.fail("mask must be float32");
  if (!ctx.hasInput(1) && !ctx.hasInput(2)) return inferPackedAttention(ctx);
  for (size_t i = 0; i < 3; ++i) {
    ctx.requireInput(i);
    if (ctx.inputType(i) != DataType::kFloat32) ctx.fail("Q, K and V must be float32");
  }
  const SymShape* q = ctx.inputShape(0);
  const SymShape* k = ctx.inputShape(1);
  const SymShape* v = ctx.inputShape(2);
  if (!q || !k || !v) {
    ctx.setOutputType(0, DataType::kFloat32);
    return;
  }
  if (q->size() != 4 || k->size() != 4 || v->size() != 4)
    ctx.fail("Q, K and V must be 4-D [batch, length, heads, dim]");
  const bool fits = mayEqual((*q)[0], (*k)[0]) && mayEqual((*q)[0], (*v)[0]) &&
                    mayEqual((*k)[1], (*v)[1]) && mayEqual((*q)[2], (*k)[2]) &&
                    mayEqual((*q)[2], (*v)[2]) && mayEqual((*q)[3], (*k)[3]);
  if (!fits) {
    ctx.fail("Q " + symShapeToString(*q) + ", K " + symShapeToString(*k) + " and V " +
             symShapeToString(*v) + " do not fit together");
  }
  ctx.setOutput(0, DataType::kFloat32, SymShape{(*q)[0], (*q)[1], (*q)[2], (*v)[3]});
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"kiln", "FusedAttention", 1, 1000, inferFusedAttention});
KILN_REGISTER_OP_SCHEMA({"kiln", "FusedConv", 1, 1000,
                         [](InferContext& ctx) { inferExtending(ctx, "Conv", 3); }});
// ONNX Runtime's FusedConv (com.microsoft 1) is the same op: kiln's mirrors it.
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "FusedConv", 1, 1000,
                         [](InferContext& ctx) { inferExtending(ctx, "Conv", 3); }});
KILN_REGISTER_OP_SCHEMA({"kiln", "FusedMatMul", 1, 1000, inferFusedMatMul});

}  // namespace kiln::ir
