// Shape and type rules of the Reduce* family, ArgMax/ArgMin and CumSum.
#include "ir/ops/reduce_axes.h"
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void requireNumeric(InferContext& ctx, bool allowBool) {
  DataType t = ctx.inputType(0);
  if (t == DataType::kString || (t == DataType::kBool && !allowBool)) {
    ctx.fail("does not accept " + dataTypeName(t), ErrorCode::kUnsupportedNode);
  }
}

void inferReduce(InferContext& ctx, bool allowBool) {
  requireNumeric(ctx, allowBool);
  const Node& node = ctx.node();
  const DataType dtype = ctx.inputType(0);
  const SymShape* in = ctx.inputShape(0);
  std::optional<std::vector<int64_t>> axes;
  const bool axesFromInput = reduceTakesAxesInput(node) && ctx.hasInput(1);
  if (axesFromInput) {
    axes = ctx.inputInts(1);
    if (!axes) {  // value-dependent: only the rank may be known
      const bool keepDims = attrInt(node, "keepdims", 1) != 0;
      if (in && keepDims) {
        ctx.setOutput(0, dtype, SymShape(in->size(), Dim::unknown()));
      } else {
        ctx.setOutputType(0, dtype);
      }
      return;
    }
  }
  if (!in) {
    ctx.setOutputType(0, dtype);
    return;
  }
  ReducePlan plan = planReduce(node, static_cast<int64_t>(in->size()), axes);
  SymShape out;
  for (size_t d = 0; d < in->size(); ++d) {
    if (!plan.reduced[d]) {
      out.push_back((*in)[d]);
    } else if (plan.keepDims) {
      out.push_back(Dim::known(1));
    }
  }
  ctx.setOutput(0, dtype, out);
}

void inferReduceNumeric(InferContext& ctx) { inferReduce(ctx, false); }
void inferReduceMinMax(InferContext& ctx) { inferReduce(ctx, true); }

void inferArgReduce(InferContext& ctx) {
  requireNumeric(ctx, false);
  const SymShape* in = ctx.inputShape(0);
  if (!in) {
    ctx.setOutputType(0, DataType::kInt64);
    return;
  }
  const Node& node = ctx.node();
  const auto rank = static_cast<int64_t>(in->size());
  if (rank == 0) ctx.fail("needs an input of rank >= 1");
  const int64_t axis = normalizeAxis(ctx, attrInt(node, "axis", 0), rank);
  const bool keepDims = attrInt(node, "keepdims", 1) != 0;
  SymShape out;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis) {
      out.push_back((*in)[static_cast<size_t>(d)]);
    } else if (keepDims) {
      out.push_back(Dim::known(1));
    }
  }
  ctx.setOutput(0, DataType::kInt64, out);
}

// CumSum: same shape as the input, along an axis given as a scalar input.
void inferCumSum(InferContext& ctx) {
  requireNumeric(ctx, false);
  const SymShape* in = ctx.inputShape(0);
  const DataType axisType = ctx.inputType(1);
  if (axisType != DataType::kInt32 && axisType != DataType::kInt64)
    ctx.fail("axis must be int32 or int64");
  auto axis = ctx.inputInts(1);
  if (axis && axis->size() != 1) ctx.fail("axis must hold one value");
  if (in && axis) normalizeAxis(ctx, axis->front(), static_cast<int64_t>(in->size()));
  inferSameAsInput0(ctx);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "ReduceSum", 1, 1000, inferReduceNumeric});
KILN_REGISTER_OP_SCHEMA({"", "ReduceMean", 1, 1000, inferReduceNumeric});
KILN_REGISTER_OP_SCHEMA({"", "ReduceProd", 1, 1000, inferReduceNumeric});
KILN_REGISTER_OP_SCHEMA({"", "ReduceL1", 1, 1000, inferReduceNumeric});
KILN_REGISTER_OP_SCHEMA({"", "ReduceL2", 1, 1000, inferReduceNumeric});
KILN_REGISTER_OP_SCHEMA({"", "ReduceLogSum", 1, 1000, inferReduceNumeric});
KILN_REGISTER_OP_SCHEMA({"", "ReduceLogSumExp", 1, 1000, inferReduceNumeric});
KILN_REGISTER_OP_SCHEMA({"", "ReduceSumSquare", 1, 1000, inferReduceNumeric});
// Bool inputs from opset 20.
KILN_REGISTER_OP_SCHEMA({"", "ReduceMax", 1, 1000, inferReduceMinMax});
KILN_REGISTER_OP_SCHEMA({"", "ReduceMin", 1, 1000, inferReduceMinMax});
KILN_REGISTER_OP_SCHEMA({"", "ArgMax", 1, 1000, inferArgReduce});
KILN_REGISTER_OP_SCHEMA({"", "ArgMin", 1, 1000, inferArgReduce});
KILN_REGISTER_OP_SCHEMA({"", "CumSum", 11, 1000, inferCumSum});

}  // namespace kiln::ir
