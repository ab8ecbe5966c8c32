// Shape rules of TensorScatter (opset 24): present_cache has past_cache's shape and type.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferTensorScatter(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  if (ctx.inputType(1) != type) ctx.fail("update must have past_cache's type");
  const std::string mode = attrString(ctx.node(), "mode", "linear");
  if (mode != "linear" && mode != "circular")
    ctx.fail("mode must be linear or circular, got '" + mode + "'");
  const SymShape* cache = ctx.inputShape(0);
  const SymShape* update = ctx.inputShape(1);
  if (cache && update && cache->size() != update->size())
    ctx.fail("update must have past_cache's rank");
  if (cache && cache->size() < 2)
    ctx.fail("past_cache must have rank >= 2, got " + symShapeToString(*cache));
  if (cache)
    normalizeAxis(ctx, attrInt(ctx.node(), "axis", -2), static_cast<int64_t>(cache->size()));
  inferSameAsInput0(ctx);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "TensorScatter", 24, 1000, inferTensorScatter});

}  // namespace kiln::ir
