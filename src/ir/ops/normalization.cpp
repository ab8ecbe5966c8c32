// Shape and type rules of the normalization operators.
#include <algorithm>

#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void requireFloat(InferContext& ctx, size_t i) {
  if (!isFloatingPoint(ctx.inputType(i))) {
    ctx.fail("expects a floating-point input, got " + dataTypeName(ctx.inputType(i)),
             ErrorCode::kUnsupportedNode);
  }
}

void requireMinRank(InferContext& ctx, size_t rank) {
  const SymShape* s = ctx.inputShape(0);
  if (s && s->size() < rank) {
    ctx.fail("expects an input of rank >= " + std::to_string(rank) + ", got rank " +
             std::to_string(s->size()));
  }
}

void inferFloatSameShape(InferContext& ctx) {
  requireFloat(ctx, 0);
  inferSameAsInput0(ctx);
}

void inferChannelNorm(InferContext& ctx) {
  requireMinRank(ctx, 2);
  inferFloatSameShape(ctx);
}

void inferBatchNorm(InferContext& ctx) {
  requireFloat(ctx, 0);
  requireMinRank(ctx, 2);
  for (size_t i = 1; i < 5; ++i) requireFloat(ctx, i);
  inferSameAsInput0(ctx);
  const bool training = ctx.opset() >= 14 && attrInt(ctx.node(), "training_mode", 0) != 0;
  const std::vector<int>& outputs = ctx.node().outputs;
  const bool statsWanted =
      std::any_of(outputs.begin() + 1, outputs.end(), [](int v) { return v != kNoValue; });
  if (ctx.opset() >= 14 && !training && statsWanted)
    ctx.fail("running mean and variance outputs need training_mode=1");
  if (ctx.opset() < 14 && statsWanted) {
    ctx.fail("training outputs of BatchNormalization before opset 14 are not supported",
             ErrorCode::kUnsupportedNode);
  }
  // Outputs 1.. are per-channel statistics shaped like the mean input.
  for (size_t i = 1; i < ctx.numOutputs(); ++i) {
    const SymShape* s = ctx.inputShape(3);
    if (s) {
      ctx.setOutput(i, ctx.inputType(3), *s);
    } else {
      ctx.setOutputType(i, ctx.inputType(3));
    }
  }
}

DataType stashType(InferContext& ctx) {
  int64_t stash = attrInt(ctx.node(), "stash_type", 1);
  switch (stash) {
    case 1:
      return DataType::kFloat32;
    case 11:
      return DataType::kFloat64;
    case 16:
      return DataType::kBFloat16;
    default:
      ctx.fail("unsupported stash_type " + std::to_string(stash), ErrorCode::kUnsupportedNode);
  }
}

void inferLayerNorm(InferContext& ctx) {
  requireFloat(ctx, 0);
  requireFloat(ctx, 1);
  inferSameAsInput0(ctx);
  if (ctx.node().opType == "RMSNormalization") {  // Y has the scale's type
    const SymShape* x = ctx.inputShape(0);
    if (x) {
      ctx.setOutput(0, ctx.inputType(1), *x);
    } else {
      ctx.setOutputType(0, ctx.inputType(1));
    }
  }
  DataType statsType = stashType(ctx);
  const SymShape* x = ctx.inputShape(0);
  if (!x) {
    ctx.setOutputType(1, statsType);
    ctx.setOutputType(2, statsType);
    return;
  }
  const int64_t rank = static_cast<int64_t>(x->size());
  const int64_t axis = normalizeAxis(ctx, attrInt(ctx.node(), "axis", -1), rank);
  SymShape stats(x->begin(), x->begin() + axis);
  stats.resize(x->size(), Dim::known(1));
  ctx.setOutput(1, statsType, stats);
  ctx.setOutput(2, statsType, stats);
}

void inferGroupNorm(InferContext& ctx) {
  if (attrInt(ctx.node(), "num_groups") < 1) ctx.fail("num_groups must be positive");
  stashType(ctx);
  inferChannelNorm(ctx);
}

void inferLpNorm(InferContext& ctx) {
  int64_t p = attrInt(ctx.node(), "p", 2);
  if (p != 1 && p != 2) ctx.fail("p must be 1 or 2, got " + std::to_string(p));
  const SymShape* s = ctx.inputShape(0);
  if (s) normalizeAxis(ctx, attrInt(ctx.node(), "axis", -1), static_cast<int64_t>(s->size()));
  inferFloatSameShape(ctx);
}

void inferLrn(InferContext& ctx) {
  if (attrInt(ctx.node(), "size") < 1) ctx.fail("size must be positive");
  requireMinRank(ctx, 3);
  inferFloatSameShape(ctx);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "BatchNormalization", 1, 1000, inferBatchNorm});
// Opset 17 added LayerNormalization; earlier models use the same op (as onnxruntime accepts it).
KILN_REGISTER_OP_SCHEMA({"", "LayerNormalization", 1, 1000, inferLayerNorm});
KILN_REGISTER_OP_SCHEMA({"", "RMSNormalization", 23, 1000, inferLayerNorm});
KILN_REGISTER_OP_SCHEMA({"", "InstanceNormalization", 1, 1000, inferChannelNorm});
KILN_REGISTER_OP_SCHEMA({"", "GroupNormalization", 18, 1000, inferGroupNorm});
KILN_REGISTER_OP_SCHEMA({"", "LpNormalization", 1, 1000, inferLpNorm});
KILN_REGISTER_OP_SCHEMA({"", "MeanVarianceNormalization", 1, 1000, inferFloatSameShape});
KILN_REGISTER_OP_SCHEMA({"", "LRN", 1, 1000, inferLrn});

}  // namespace kiln::ir
