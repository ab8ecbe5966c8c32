// Shape rules of CausalConvWithState: a depthwise causal 1-D convolution that carries its last
// k - 1 input steps between calls. input (B, C, L), weight (C, 1, k) -> output (B, C, L) and
// present_state (B, C, k - 1) (ONNX opset 27). The com.microsoft op adds dilation (the state holds
// (k - 1) * dilation steps) and channels_last: input (B, L, d_1..d_n) with C = d_1 * .. * d_n and
// state (B, (k - 1) * dilation, d_1..d_n). Its other attributes are what onnxruntime runs on CUDA
// only, and kiln refuses them as onnxruntime's CPU kernel does.
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
  if (w && (*w)[2].isKnown()) {
    if ((*w)[2].value < 1) ctx.fail("weight must have k >= 1 taps, got " + symShapeToString(*w));
    stateLength = Dim::known((*w)[2].value - 1);
  }
  ctx.setOutput(1, type, SymShape{(*in)[0], (*in)[1], stateLength});
}

// The attributes onnxruntime's CPU kernel refuses at their non-default values (CUDA only).
void refuseCudaOnlyAttributes(const InferContext& ctx) {
  const int64_t ndim = attrInt(ctx.node(), "ndim", 1);
  if (ndim < 1 || ndim > 3) ctx.fail("ndim must be 1, 2 or 3, got " + std::to_string(ndim));
  if (ndim != 1) {
    ctx.fail("ndim " + std::to_string(ndim) +
                 " is not implemented (onnxruntime's CPU kernel runs ndim 1 only)",
             ErrorCode::kUnsupportedNode);
  }
  const struct {
    const char* name;
    int64_t fallback;
  } cudaOnly[] = {{"state_window", 0},   {"state_length", 0},         {"input_channel_offset", 0},
                  {"input_channels", 0}, {"state_channels_last", -1}, {"state_update_capacity", 0}};
  for (const auto& attr : cudaOnly) {
    const int64_t value = attrInt(ctx.node(), attr.name, attr.fallback);
    if (value != attr.fallback) {
      ctx.fail(std::string(attr.name) + " " + std::to_string(value) +
                   " is not implemented (onnxruntime runs it on CUDA only)",
               ErrorCode::kUnsupportedNode);
    }
  }
  const auto& outputs = ctx.node().outputs;
  if (outputs.size() > 2 && outputs[2] != kNoValue) {
    ctx.fail("the state_update output is not implemented (onnxruntime runs it on CUDA only)",
             ErrorCode::kUnsupportedNode);
  }
}

void inferMicrosoftCausalConvWithState(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  if (type != DataType::kFloat32 && type != DataType::kFloat16) {
    ctx.fail(
        "input must be float32 or float16 (as onnxruntime's CPU kernel), got " + dataTypeName(type),
        ErrorCode::kUnsupportedNode);
  }
  const std::string activation = attrString(ctx.node(), "activation", "none");
  if (activation != "none" && activation != "silu" && activation != "swish")
    ctx.fail("activation must be none, silu or swish, got '" + activation + "'");
  const int64_t dilation = attrInt(ctx.node(), "dilation", 1);
  if (dilation < 1) ctx.fail("dilation must be >= 1, got " + std::to_string(dilation));
  const int64_t channelsLast = attrInt(ctx.node(), "channels_last", 0);
  if (channelsLast != 0 && channelsLast != 1)
    ctx.fail("channels_last must be 0 or 1, got " + std::to_string(channelsLast));
  refuseCudaOnlyAttributes(ctx);
  const SymShape* in = ctx.inputShape(0);
  const SymShape* w = ctx.inputShape(1);
  if (in && (channelsLast ? in->size() < 3 : in->size() != 3)) {
    ctx.fail(std::string("input must be ") +
             (channelsLast ? "(batch, length, channels...)" : "(batch, channels, length)") +
             ", got " + symShapeToString(*in));
  }
  if (w && w->size() != 3) ctx.fail("weight must be (channels, 1, k), got " + symShapeToString(*w));
  if (!in) {
    ctx.setOutputType(0, type);
    ctx.setOutputType(1, type);
    return;
  }
  ctx.setOutput(0, type, *in);
  Dim stateLength = Dim::unknown();
  if (w && (*w)[2].isKnown()) {
    if ((*w)[2].value < 1) ctx.fail("weight must have k >= 1 taps, got " + symShapeToString(*w));
    stateLength = productDims(ctx.node(), Dim::known((*w)[2].value - 1), dilation,
                              "the state length (k - 1) * dilation");
  }
  SymShape state = *in;
  state[channelsLast ? 1 : 2] = stateLength;
  ctx.setOutput(1, type, state);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "CausalConvWithState", 1, 1000,
                         inferMicrosoftCausalConvWithState});
KILN_REGISTER_OP_SCHEMA({"", "CausalConvWithState", 27, 1000, inferCausalConvWithState});

}  // namespace kiln::ir
