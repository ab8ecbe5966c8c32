// Shape rules of CumProd (opset 26): the input's shape, along an axis given as a scalar input.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferCumProd(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  if (type == DataType::kString || type == DataType::kBool)
    ctx.fail("does not accept " + dataTypeName(type), ErrorCode::kUnsupportedNode);
  const DataType axisType = ctx.inputType(1);
  if (axisType != DataType::kInt32 && axisType != DataType::kInt64)
    ctx.fail("axis must be int32 or int64");
  const auto axis = ctx.inputInts(1);
  if (axis && axis->size() != 1) ctx.fail("axis must hold one value");
  if (const SymShape* in = ctx.inputShape(0); in && axis)
    normalizeAxis(ctx, axis->front(), static_cast<int64_t>(in->size()));
  inferSameAsInput0(ctx);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "CumProd", 26, 1000, inferCumProd});

}  // namespace kiln::ir
