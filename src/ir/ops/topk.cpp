// Shape and type rules of TopK: k as an attribute before opset 10, as input 1 from opset 10.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferTopK(InferContext& ctx) {
  const DataType dtype = ctx.inputType(0);
  if (dtype == DataType::kString || dtype == DataType::kBool) {
    ctx.fail("does not accept " + dataTypeName(dtype), ErrorCode::kUnsupportedNode);
  }
  std::optional<int64_t> k;
  if (ctx.opset() < 10) {
    k = attrInt(ctx.node(), "k");
  } else if (auto ks = ctx.inputInts(1)) {
    if (ks->size() != 1) ctx.fail("K must hold one value");
    k = ks->front();
  }
  if (k && *k < 0) ctx.fail("k must not be negative, got " + std::to_string(*k));
  const SymShape* in = ctx.inputShape(0);
  if (!in) {
    ctx.setOutputType(0, dtype);
    ctx.setOutputType(1, DataType::kInt64);
    return;
  }
  const auto rank = static_cast<int64_t>(in->size());
  if (rank == 0) ctx.fail("needs an input of rank >= 1");
  const auto axis = static_cast<size_t>(normalizeAxis(ctx, attrInt(ctx.node(), "axis", -1), rank));
  const Dim& extent = (*in)[axis];
  if (k && extent.isKnown() && *k > extent.value) {
    ctx.fail("k = " + std::to_string(*k) + " exceeds the axis size " +
             std::to_string(extent.value));
  }
  SymShape out = *in;
  out[axis] = k ? Dim::known(*k) : Dim::unknown();
  ctx.setOutput(0, dtype, out);
  ctx.setOutput(1, DataType::kInt64, out);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "TopK", 1, 1000, inferTopK});

}  // namespace kiln::ir
