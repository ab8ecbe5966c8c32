// Shape rules of GridSample (16: 4-D input; 20, 22: N-d) and AffineGrid (20).
// GridSample: X (N, C, D1.., Dr), grid (N, O1.., Or, r) -> Y (N, C, O1.., Or).
// AffineGrid: theta (N, r, r + 1), size [N, C, D1.., Dr] -> grid (N, D1.., Dr, r) for r = 2 or 3.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void checkGridSampleModes(InferContext& ctx) {
  const std::string mode = attrString(ctx.node(), "mode", ctx.opset() < 20 ? "bilinear" : "linear");
  const bool ok = ctx.opset() < 20 ? (mode == "bilinear" || mode == "nearest" || mode == "bicubic")
                                   : (mode == "linear" || mode == "nearest" || mode == "cubic");
  if (!ok) {
    ctx.fail("mode '" + mode + "' is not valid at opset " + std::to_string(ctx.opset()) +
             (ctx.opset() < 20 ? " (bilinear, nearest, bicubic)" : " (linear, nearest, cubic)"));
  }
  const std::string padding = attrString(ctx.node(), "padding_mode", "zeros");
  if (padding != "zeros" && padding != "border" && padding != "reflection") {
    ctx.fail("padding_mode must be zeros, border or reflection, got '" + padding + "'");
  }
}

void inferGridSample(InferContext& ctx) {
  const DataType dtype = ctx.inputType(0);
  if (!isFloatingPoint(dtype))
    ctx.fail("X of type " + dataTypeName(dtype) + " is not supported (float types only)",
             ErrorCode::kUnsupportedNode);
  if (!isFloatingPoint(ctx.inputType(1)))
    ctx.fail("grid must be a float tensor, got " + dataTypeName(ctx.inputType(1)));
  checkGridSampleModes(ctx);
  const SymShape* x = ctx.inputShape(0);
  const SymShape* grid = ctx.inputShape(1);
  if (x && x->size() < 3) ctx.fail("X must have rank >= 3, got " + symShapeToString(*x));
  if (x && ctx.opset() < 20 && x->size() != 4)
    ctx.fail("X must be 4-D before opset 20, got " + symShapeToString(*x));
  if (x && grid) {
    const size_t r = x->size() - 2;
    if (grid->size() != r + 2)
      ctx.fail("grid " + symShapeToString(*grid) + " must have rank " + std::to_string(r + 2));
    if (grid->back().isKnown() && grid->back().value != static_cast<int64_t>(r)) {
      ctx.fail("grid's last dim must be " + std::to_string(r) + ", got " + symShapeToString(*grid));
    }
  }
  if (!x || !grid) {
    ctx.setOutputType(0, dtype);
    return;
  }
  SymShape out{(*x)[0], (*x)[1]};
  out.insert(out.end(), grid->begin() + 1, grid->end() - 1);
  ctx.setOutput(0, dtype, out);
}

void inferAffineGrid(InferContext& ctx) {
  const DataType dtype = ctx.inputType(0);
  if (!isFloatingPoint(dtype))
    ctx.fail("theta must be a float tensor, got " + dataTypeName(dtype),
             ErrorCode::kUnsupportedNode);
  if (ctx.inputType(1) != DataType::kInt64) ctx.fail("size must be int64");
  const SymShape* theta = ctx.inputShape(0);
  if (theta && theta->size() != 3)
    ctx.fail("theta must be (N, 2, 3) or (N, 3, 4), got " + symShapeToString(*theta));
  const auto size = ctx.inputInts(1);
  if (!size) {
    ctx.setOutputType(0, dtype);
    return;
  }
  if (size->size() != 4 && size->size() != 5)
    ctx.fail("size must hold 4 (2-D) or 5 (3-D) values, got " + std::to_string(size->size()));
  const int64_t r = static_cast<int64_t>(size->size()) - 2;
  if (theta && (((*theta)[1].isKnown() && (*theta)[1].value != r) ||
                ((*theta)[2].isKnown() && (*theta)[2].value != r + 1))) {
    ctx.fail("theta " + symShapeToString(*theta) + " does not match a " + std::to_string(r) +
             "-D size");
  }
  SymShape out{Dim::known((*size)[0])};
  for (size_t i = 2; i < size->size(); ++i) out.push_back(Dim::known((*size)[i]));
  out.push_back(Dim::known(r));
  ctx.setOutput(0, dtype, out);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "GridSample", 16, 1000, inferGridSample});
KILN_REGISTER_OP_SCHEMA({"", "AffineGrid", 20, 1000, inferAffineGrid});

}  // namespace kiln::ir
