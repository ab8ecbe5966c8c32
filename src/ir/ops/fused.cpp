// kiln-internal fused operators (domain "kiln", opset 1), made by the fusion passes in src/opt:
//   FusedConv(X, W, [B], [Z]) -> Y = act(Conv(X, W, B) + Z)        Conv's attributes, plus
//   FusedMatMul(A, B, [bias], [Z]) -> Y = act(A @ B + bias + Z)     "activation" (the replaced op's
//                                                                    name, "" = none) and
// "activation_params" (Clip min/max, LeakyRelu alpha, HardSigmoid alpha/beta). Z is shaped like Y.
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
  if (ctx.inputType(residualInput) != ctx.inputType(0)) ctx.fail("residual input type differs from X's");
}

void inferFusedMatMul(InferContext& ctx) {
  inferExtending(ctx, "MatMul", 3);
  if (!ctx.hasInput(2)) return;
  const SymShape* b = ctx.inputShape(1);
  const SymShape* bias = ctx.inputShape(2);
  if (bias && (bias->size() != 1 || (b && !b->empty() && b->back().isKnown() && (*bias)[0].isKnown() &&
                                     (*bias)[0].value != b->back().value))) {
    ctx.fail("bias must be 1-D with one value per output column");
  }
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"kiln", "FusedConv", 1, 1000, [](InferContext& ctx) { inferExtending(ctx, "Conv", 3); }});
KILN_REGISTER_OP_SCHEMA({"kiln", "FusedMatMul", 1, 1000, inferFusedMatMul});

}  // namespace kiln::ir
