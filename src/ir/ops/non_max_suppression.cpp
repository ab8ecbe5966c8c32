// Shape rules of NonMaxSuppression (opsets 10, 11): selected_indices is [num_selected, 3] int64
// (batch, class, box); num_selected depends on the data.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferNonMaxSuppression(InferContext& ctx) {
  if (ctx.inputType(0) != DataType::kFloat32)
    ctx.fail("boxes must be float32, got " + dataTypeName(ctx.inputType(0)),
             ErrorCode::kUnsupportedNode);
  if (ctx.inputType(1) != DataType::kFloat32)
    ctx.fail("scores must be float32, got " + dataTypeName(ctx.inputType(1)),
             ErrorCode::kUnsupportedNode);
  const SymShape* boxes = ctx.inputShape(0);
  const SymShape* scores = ctx.inputShape(1);
  if (boxes && (boxes->size() != 3 || ((*boxes)[2].isKnown() && (*boxes)[2].value != 4))) {
    ctx.fail("boxes must be [batches, boxes, 4], got " + symShapeToString(*boxes));
  }
  if (scores && scores->size() != 3)
    ctx.fail("scores must be [batches, classes, boxes], got " + symShapeToString(*scores));
  const int64_t centerPointBox = attrInt(ctx.node(), "center_point_box", 0);
  if (centerPointBox != 0 && centerPointBox != 1)
    ctx.fail("center_point_box must be 0 or 1, got " + std::to_string(centerPointBox));
  ctx.setOutput(0, DataType::kInt64, SymShape{Dim::unknown(), Dim::known(3)});
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "NonMaxSuppression", 10, 1000, inferNonMaxSuppression});

}  // namespace kiln::ir
