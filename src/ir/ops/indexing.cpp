// Shape and type rules of ops that read or write elements by index: Gather, GatherElements,
// GatherND, ScatterND, ScatterElements, Scatter, OneHot.
#include "ir/ops/shape_rules.h"

namespace kiln::ir {
namespace {

void requireIndexType(const InferContext& ctx, size_t i) {
  DataType t = ctx.inputType(i);
  if (t != DataType::kInt32 && t != DataType::kInt64) {
    ctx.fail("indices must be int32 or int64, got " + dataTypeName(t), ErrorCode::kUnsupportedNode);
  }
}

void inferGather(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  requireIndexType(ctx, 1);
  const SymShape* data = ctx.inputShape(0);
  const SymShape* indices = ctx.inputShape(1);
  if (!data || !indices) {
    ctx.setOutputType(0, type);
    return;
  }
  const int64_t axis =
      normalizeAxis(ctx, attrInt(ctx.node(), "axis", 0), static_cast<int64_t>(data->size()));
  if (data->empty()) ctx.fail("data must have rank 1 or more");
  SymShape out(data->begin(), data->begin() + axis);
  out.insert(out.end(), indices->begin(), indices->end());
  out.insert(out.end(), data->begin() + axis + 1, data->end());
  ctx.setOutput(0, type, out);
}

void inferGatherElements(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  requireIndexType(ctx, 1);
  const SymShape* data = ctx.inputShape(0);
  const SymShape* indices = ctx.inputShape(1);
  if (data && indices && data->size() != indices->size()) {
    ctx.fail("data " + symShapeToString(*data) + " and indices " + symShapeToString(*indices) +
             " differ in rank");
  }
  if (data) normalizeAxis(ctx, attrInt(ctx.node(), "axis", 0), static_cast<int64_t>(data->size()));
  if (indices) {
    ctx.setOutput(0, type, *indices);
  } else {
    ctx.setOutputType(0, type);
  }
}

void inferGatherND(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  if (ctx.inputType(1) != DataType::kInt64)
    ctx.fail("indices must be int64", ErrorCode::kUnsupportedNode);
  const SymShape* data = ctx.inputShape(0);
  const SymShape* indices = ctx.inputShape(1);
  const int64_t batchDims = ctx.opset() >= 12 ? attrInt(ctx.node(), "batch_dims", 0) : 0;
  if (!data || !indices || indices->empty() || !indices->back().isKnown()) {
    ctx.setOutputType(0, type);
    return;
  }
  const int64_t r = static_cast<int64_t>(data->size());
  const int64_t q = static_cast<int64_t>(indices->size());
  const int64_t k = indices->back().value;
  if (batchDims < 0 || batchDims >= std::min(r, q))
    ctx.fail("batch_dims " + std::to_string(batchDims) + " is out of range");
  if (k < 1 || batchDims + k > r) {
    ctx.fail("index tuples of length " + std::to_string(k) + " do not fit data " +
             symShapeToString(*data));
  }
  SymShape out(indices->begin(), indices->end() - 1);
  out.insert(out.end(), data->begin() + batchDims + k, data->end());
  ctx.setOutput(0, type, out);
}

// ScatterND, ScatterElements, Scatter: the output is the data with some elements replaced.
void inferScatter(InferContext& ctx) {
  requireIndexType(ctx, 1);
  if (ctx.inputType(2) != ctx.inputType(0)) ctx.fail("updates and data have different types");
  std::string reduction = attrString(ctx.node(), "reduction", "none");
  if (reduction != "none") {
    const bool known = reduction == "add" || reduction == "mul" ||
                       (ctx.opset() >= 18 && (reduction == "max" || reduction == "min"));
    if (!known) ctx.fail("unsupported reduction '" + reduction + "'", ErrorCode::kUnsupportedNode);
  }
  inferSameAsInput0(ctx);
}

void inferOneHot(InferContext& ctx) {
  const DataType type = ctx.inputType(2);
  const SymShape* indices = ctx.inputShape(0);
  if (!indices) {
    ctx.setOutputType(0, type);
    return;
  }
  const int64_t rank = static_cast<int64_t>(indices->size()) + 1;
  const int64_t axis = normalizeAxis(ctx, attrInt(ctx.node(), "axis", -1), rank);
  Dim depth = Dim::unknown();
  if (const Tensor* d = ctx.inputValue(1)) {
    if (d->numel() != 1) ctx.fail("depth must hold one value, got " + d->describe());
    const int64_t v = d->intAt(0);  // saturating: a float depth of 1e30 or NaN has no int64 value
    if (v < 1)
      ctx.fail("depth " + std::to_string(v) + " must be positive", ErrorCode::kInvalidArgument);
    depth = Dim::known(v);
  }
  if (const Tensor* values = ctx.inputValue(2); values && values->numel() != 2) {
    ctx.fail("values must hold [off, on], got " + values->describe());
  }
  SymShape out = *indices;
  out.insert(out.begin() + axis, depth);
  ctx.setOutput(0, type, out);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "Gather", 1, 1000, inferGather});
KILN_REGISTER_OP_SCHEMA({"", "GatherElements", 11, 1000, inferGatherElements});
KILN_REGISTER_OP_SCHEMA({"", "GatherND", 11, 1000, inferGatherND});
KILN_REGISTER_OP_SCHEMA({"", "ScatterND", 11, 1000, inferScatter});
KILN_REGISTER_OP_SCHEMA({"", "ScatterElements", 11, 1000, inferScatter});
KILN_REGISTER_OP_SCHEMA({"", "Scatter", 9, 10, inferScatter});
KILN_REGISTER_OP_SCHEMA({"", "OneHot", 9, 1000, inferOneHot});

}  // namespace kiln::ir
