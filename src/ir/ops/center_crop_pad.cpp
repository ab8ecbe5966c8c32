// Shape rules of CenterCropPad (opset 18): each listed axis becomes the requested size, cropped
// or zero-padded around the center.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferCenterCropPad(InferContext& ctx) {
  const DataType dtype = ctx.inputType(0);
  const DataType shapeType = ctx.inputType(1);
  if (shapeType != DataType::kInt32 && shapeType != DataType::kInt64)
    ctx.fail("shape must be int32 or int64");
  const SymShape* in = ctx.inputShape(0);
  const auto target = ctx.inputInts(1);
  if (!in) {
    ctx.setOutputType(0, dtype);
    return;
  }
  const auto rank = static_cast<int64_t>(in->size());
  std::vector<int64_t> axes = attrInts(ctx.node(), "axes", {});
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  SymShape out = *in;
  if (!target) {
    for (int64_t a : axes) out[normalizeAxis(ctx, a, rank)] = Dim::unknown();
  } else {
    if (target->size() != axes.size()) {
      ctx.fail("shape holds " + std::to_string(target->size()) + " values for " +
               std::to_string(axes.size()) + " axes");
    }
    for (size_t i = 0; i < axes.size(); ++i) {
      if ((*target)[i] < 0) ctx.fail("shape values must not be negative");
      out[normalizeAxis(ctx, axes[i], rank)] = Dim::known((*target)[i]);
    }
  }
  ctx.setOutput(0, dtype, out);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "CenterCropPad", 18, 1000, inferCenterCropPad});

}  // namespace kiln::ir
