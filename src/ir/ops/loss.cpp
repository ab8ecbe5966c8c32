// Shape rules of the loss ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opsets 12,
// 13). Input (N, C, d1.., dk), target (N, d1.., dk); the loss has the target's shape for reduction
// "none" and is a scalar for "sum" and "mean".
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferLoss(InferContext& ctx) {
  const DataType dtype = ctx.inputType(0);
  if (!isFloatingPoint(dtype))
    ctx.fail("input must be a float tensor, got " + dataTypeName(dtype),
             ErrorCode::kUnsupportedNode);
  const DataType targetType = ctx.inputType(1);
  if (targetType != DataType::kInt32 && targetType != DataType::kInt64) {
    ctx.fail("target must be int32 or int64, got " + dataTypeName(targetType));
  }
  if (ctx.hasInput(2) && ctx.inputType(2) != dtype) ctx.fail("weight must have the input's type");
  const std::string reduction = attrString(ctx.node(), "reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    ctx.fail("reduction must be none, sum or mean, got '" + reduction + "'");
  }
  const SymShape* in = ctx.inputShape(0);
  const SymShape* target = ctx.inputShape(1);
  if (in && in->size() < 2)
    ctx.fail("input must have rank >= 2 (N, C, ...), got " + symShapeToString(*in));
  if (in && target && target->size() + 1 != in->size()) {
    ctx.fail("target " + symShapeToString(*target) + " must have one dim fewer than the input " +
             symShapeToString(*in));
  }
  if (reduction != "none") {
    ctx.setOutput(0, dtype, SymShape{});
  } else if (target) {
    ctx.setOutput(0, dtype, *target);
  } else if (in) {
    SymShape out = *in;
    out.erase(out.begin() + 1);
    ctx.setOutput(0, dtype, out);
  } else {
    ctx.setOutputType(0, dtype);
  }
  // SoftmaxCrossEntropyLoss's optional log_prob has the input's shape.
  if (ctx.numOutputs() > 1) {
    if (in)
      ctx.setOutput(1, dtype, *in);
    else
      ctx.setOutputType(1, dtype);
  }
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "NegativeLogLikelihoodLoss", 12, 1000, inferLoss});
KILN_REGISTER_OP_SCHEMA({"", "SoftmaxCrossEntropyLoss", 12, 1000, inferLoss});

}  // namespace kiln::ir
