// Shape rules of RotaryEmbedding (opset 23): the output has the input's shape and type; input is
// (B, H, S, D) or (B, S, H * D) with num_heads.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferRotaryEmbedding(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  if (!isFloatingPoint(type)) ctx.fail("input must be a float tensor, got " + dataTypeName(type), ErrorCode::kUnsupportedNode);
  if (ctx.inputType(1) != type || ctx.inputType(2) != type) ctx.fail("cos_cache and sin_cache must have the input's type");
  const SymShape* in = ctx.inputShape(0);
  if (in && in->size() != 3 && in->size() != 4) ctx.fail("input must be 3-D or 4-D, got " + symShapeToString(*in));
  if (in && in->size() == 3 && attrInt(ctx.node(), "num_heads", 0) <= 0) ctx.fail("a 3-D input needs num_heads");
  inferSameAsInput0(ctx);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "RotaryEmbedding", 23, 1000, inferRotaryEmbedding});

}  // namespace kiln::ir
