// Shape rules of ops whose output size depends on the data: NonZero, Compress, Unique.
#include "ir/ops/shape_rules.h"

namespace kiln::ir {
namespace {

void inferNonZero(InferContext& ctx) {
  ctx.inputType(0);
  const SymShape* in = ctx.inputShape(0);
  // A scalar counts as one axis, as numpy's nonzero does.
  Dim rank =
      in ? Dim::known(std::max<int64_t>(1, static_cast<int64_t>(in->size()))) : Dim::unknown();
  ctx.setOutput(0, DataType::kInt64, SymShape{rank, Dim::unknown()});
}

void inferCompress(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  if (ctx.inputType(1) != DataType::kBool) ctx.fail("condition must be bool");
  const SymShape* in = ctx.inputShape(0);
  const SymShape* cond = ctx.inputShape(1);
  if (cond && cond->size() != 1) ctx.fail("condition must be 1-D, got " + symShapeToString(*cond));
  // The selected count is known when the condition is.
  Dim count = Dim::unknown();
  if (const Tensor* c = ctx.inputValue(1)) {
    int64_t n = 0;
    for (int64_t i = 0; i < c->numel(); ++i) n += c->data<bool>()[i] ? 1 : 0;
    count = Dim::known(n);
  }
  if (!hasAttr(ctx.node(), "axis")) {
    ctx.setOutput(0, type, SymShape{count});
    return;
  }
  if (!in) {
    ctx.setOutputType(0, type);
    return;
  }
  const int64_t axis =
      normalizeAxis(ctx, attrInt(ctx.node(), "axis"), static_cast<int64_t>(in->size()));
  SymShape out = *in;
  out[axis] = count;
  ctx.setOutput(0, type, out);
}

void inferUnique(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  const SymShape* in = ctx.inputShape(0);
  if (!hasAttr(ctx.node(), "axis")) {
    ctx.setOutput(0, type, SymShape{Dim::unknown()});
  } else if (in) {
    SymShape out = *in;
    out[normalizeAxis(ctx, attrInt(ctx.node(), "axis"), static_cast<int64_t>(in->size()))] =
        Dim::unknown();
    ctx.setOutput(0, type, out);
  } else {
    ctx.setOutputType(0, type);
  }
  for (size_t i = 1; i < 4; ++i) ctx.setOutput(i, DataType::kInt64, SymShape{Dim::unknown()});
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "NonZero", 9, 1000, inferNonZero});
KILN_REGISTER_OP_SCHEMA({"", "Compress", 9, 1000, inferCompress});
KILN_REGISTER_OP_SCHEMA({"", "Unique", 11, 1000, inferUnique});

}  // namespace kiln::ir
