// Shape rules of Swish (opset 24): the input's shape and float type.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferSwish(InferContext& ctx) {
  if (!isFloatingPoint(ctx.inputType(0)))
    ctx.fail("X must be a float tensor, got " + dataTypeName(ctx.inputType(0)),
             ErrorCode::kUnsupportedNode);
  inferSameAsInput0(ctx);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "Swish", 24, 1000, inferSwish});

}  // namespace kiln::ir
