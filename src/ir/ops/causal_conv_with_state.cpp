// Shape rules of CausalConvWithState (opset 27): a depthwise causal 1-D convolution that carries
// its last k - 1 input steps between calls. input (B, C, L), weight (C, 1, k) ->
// output (B, C, L) and present_state (B, C, k - 1).
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferCausalConvWithState(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  if (!isFloatingPoint(type))
    ctx.fail("input must be a float tensor, got " + dataTypeName(type),
             ErrorCode::kUnsupportedNode);
  const std::string activation = attrString(ctx.node(), "activation", "none");
  if (activation != "none" && activation != "silu" && activation != "swish") {
    ctx.fail("activation must be none, silu or swish, got '" + activation + "'");
  }
  const SymShape* in = ctx.inputShape(0);
  const SymShape* w = ctx.inputShape(1);
  if (in && in->size() != 3)
    ctx.fail("input must be (batch, channels, length), got " + symShapeToString(*in));
  if (w && w->size() != 3) ctx.fail("weight must be (channels, 1, k), got " + symShapeToString(*w));
  if (!in) {
    ctx.setOutputType(0, type);
    ctx.setOutputType(1, type);
    return;
  }
  ctx.setOutput(0, type, *in);
  Dim stateLength = Dim::unknown();
  if (w && (*w)[2].isKnown()) stateLength = Dim::known((*w)[2].value - 1);
  ctx.setOutput(1, type, SymShape{(*in)[0], (*in)[1], stateLength});
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "CausalConvWithState", 27, 1000, inferCausalConvWithState});

}  // namespace kiln::ir
