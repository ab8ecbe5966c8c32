// Shape and type rules of Det: [..., M, M] -> [...].
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferDet(InferContext& ctx) {
  const DataType dtype = ctx.inputType(0);
  if (!isFloatingPoint(dtype)) {
    ctx.fail("expects a floating-point input, got " + dataTypeName(dtype),
             ErrorCode::kUnsupportedNode);
  }
  const SymShape* in = ctx.inputShape(0);
  if (!in) {
    ctx.setOutputType(0, dtype);
    return;
  }
  if (in->size() < 2) ctx.fail("needs an input of rank >= 2");
  const Dim& rows = (*in)[in->size() - 2];
  const Dim& cols = (*in)[in->size() - 1];
  if (rows.isKnown() && cols.isKnown() && rows.value != cols.value) {
    ctx.fail("needs square matrices, got " + rows.toString() + " x " + cols.toString());
  }
  ctx.setOutput(0, dtype, SymShape(in->begin(), in->end() - 2));
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "Det", 11, 1000, inferDet});

}  // namespace kiln::ir
