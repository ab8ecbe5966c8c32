#include "backends/cpu/kernels/run_checks.h"

#include "ir/shape_helpers.h"

namespace kiln::cpu {

int64_t normalizeAxis(const KernelContext& ctx, int64_t axis, int64_t rank) {
  if (!ir::axisInRange(axis, rank))
    ctx.fail(ir::axisRangeMessage(axis, rank), ErrorCode::kInvalidModel);
  return axis < 0 ? axis + rank : axis;
}

Shape broadcastShapes(const KernelContext& ctx, const Shape& a, const Shape& b) {
  std::optional<Shape> out = ir::tryBroadcastShapes(a, b);
  if (!out) ctx.fail(ir::broadcastMessage(a, b), ErrorCode::kInvalidArgument);
  return *out;
}

}  // namespace kiln::cpu
