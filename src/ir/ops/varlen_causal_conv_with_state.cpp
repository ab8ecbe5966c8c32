// Shape rules of com.microsoft VarlenCausalConvWithState: CausalConvWithState over a packed,
// token-major batch of sequences. input (T, C), weight (C, 1, k), cumulative_sequence_length
// (B + 1) int32, initial_state (B, C, (k - 1) * dilation) -> output (T, C), final_state (the
// initial_state's shape) and, optionally, state_update (B, state_update_capacity, C): each
// request's first min(capture_count[b], capacity, its length) input tokens, zeros after them.
// The dynamic grouped two-tap mode (kernel_delta, previous_mask) is onnxruntime's CUDA only.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

constexpr int64_t kMaxStateUpdateCapacity = 8;  // onnxruntime's bound

void requireInt32(const InferContext& ctx, size_t i, const char* name) {
  if (ctx.hasInput(i) && ctx.inputType(i) != DataType::kInt32)
    ctx.fail(std::string(name) + " must be int32, got " + dataTypeName(ctx.inputType(i)));
}

void requireRank(const InferContext& ctx, size_t i, size_t rank, const std::string& what) {
  const SymShape* s = ctx.hasInput(i) ? ctx.inputShape(i) : nullptr;
  if (s && s->size() != rank) ctx.fail(what + ", got " + symShapeToString(*s));
}

void inferVarlenCausalConvWithState(InferContext& ctx) {
  for (size_t i : {0, 1, 2, 4}) ctx.requireInput(i);
  const DataType type = ctx.inputType(0);
  if (type != DataType::kFloat32 && type != DataType::kFloat16 && type != DataType::kBFloat16) {
    ctx.fail("input must be float32, float16 or bfloat16, got " + dataTypeName(type),
             ErrorCode::kUnsupportedNode);
  }
  for (size_t i : {1, 3, 4}) {
    if (ctx.hasInput(i) && ctx.inputType(i) != type) {
      ctx.fail("input " + std::to_string(i) + " must have input's type " + dataTypeName(type) +
               ", got " + dataTypeName(ctx.inputType(i)));
    }
  }
  requireInt32(ctx, 2, "cumulative_sequence_length");
  requireInt32(ctx, 5, "capture_count");
  const std::string activation = attrString(ctx.node(), "activation", "none");
  if (activation != "none" && activation != "silu" && activation != "swish")
    ctx.fail("activation must be none, silu or swish, got '" + activation + "'");
  const int64_t dilation = attrInt(ctx.node(), "dilation", 1);
  if (dilation < 1) ctx.fail("dilation must be >= 1, got " + std::to_string(dilation));
  const int64_t capacity = attrInt(ctx.node(), "state_update_capacity", 0);
  if (capacity < 0 || capacity > kMaxStateUpdateCapacity) {
    ctx.fail("state_update_capacity must be in [0, 8], got " + std::to_string(capacity));
  }
  if (ctx.hasInput(5) != (capacity > 0)) {
    ctx.fail("capture_count must be given exactly when state_update_capacity is positive (it is " +
             std::to_string(capacity) + ")");
  }
  if (ctx.hasInput(6) || ctx.hasInput(7)) {
    ctx.fail(
        "the dynamic grouped mode (kernel_delta, previous_mask) is not implemented (onnxruntime "
        "runs it on CUDA only)",
        ErrorCode::kUnsupportedNode);
  }
  if (attrInt(ctx.node(), "group_size", 1) != 1 || attrInt(ctx.node(), "delta_offset", 0) != 0)
    ctx.fail("group_size and delta_offset apply to kernel_delta only");
  requireRank(ctx, 0, 2, "input must be (total_tokens, channels)");
  requireRank(ctx, 1, 3, "weight must be (channels, 1, k)");
  requireRank(ctx, 2, 1, "cumulative_sequence_length must be (batch + 1)");
  requireRank(ctx, 3, 1, "bias must be (channels)");
  requireRank(ctx, 4, 3, "initial_state must be (batch, channels, (k - 1) * dilation)");
  requireRank(ctx, 5, 1, "capture_count must be (batch)");
  const SymShape* in = ctx.inputShape(0);
  const SymShape* state = ctx.inputShape(4);
  if (in)
    ctx.setOutput(0, type, *in);
  else
    ctx.setOutputType(0, type);
  if (state)
    ctx.setOutput(1, type, *state);
  else
    ctx.setOutputType(1, type);
  if (ctx.numOutputs() > 2) {
    const Dim batch = state ? (*state)[0] : Dim::unknown();
    const Dim channels = in ? (*in)[1] : Dim::unknown();
    ctx.setOutput(2, type, SymShape{batch, Dim::known(capacity), channels});
  }
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "VarlenCausalConvWithState", 1, 1000,
                         inferVarlenCausalConvWithState});

}  // namespace kiln::ir
