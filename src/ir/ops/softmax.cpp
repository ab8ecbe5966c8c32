// Shape and type rules of Softmax, LogSoftmax and Hardmax.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

// Before opset 13 the input is flattened to 2-D at `axis` (default 1); from 13 the op works
// along `axis` (default -1). Either way the output has the input's type and shape.
void inferSoftmaxLike(InferContext& ctx) {
  if (!isFloatingPoint(ctx.inputType(0))) {
    ctx.fail("expects a floating-point input, got " + dataTypeName(ctx.inputType(0)),
             ErrorCode::kUnsupportedNode);
  }
  const SymShape* in = ctx.inputShape(0);
  if (in) {
    const int64_t fallback = ctx.opset() >= 13 ? -1 : 1;
    normalizeAxis(ctx, attrInt(ctx.node(), "axis", fallback), static_cast<int64_t>(in->size()));
  }
  inferSameAsInput0(ctx);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "Softmax", 1, 1000, inferSoftmaxLike});
KILN_REGISTER_OP_SCHEMA({"", "LogSoftmax", 1, 1000, inferSoftmaxLike});
KILN_REGISTER_OP_SCHEMA({"", "Hardmax", 1, 1000, inferSoftmaxLike});

}  // namespace kiln::ir
