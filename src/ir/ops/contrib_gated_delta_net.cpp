// Shape rules of com.microsoft GatedDeltaNet: token-major query / key / value ([tokens, H, D] or
// [B, S, H, D]), or packed QKV ([tokens, W] or [B, S, W], head counts from the V-major float
// initial_state [B, Hv, dv, dk]) -> output (the token dims, Hv, dv), final_state and the float
// compact transitions state_update [B, C * (decay width + Hk * dk + Hv * dv)]. The attributes are
// checked here; the shapes, which cu_seqlens and the packed width tie together, in the kernel.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferGatedDeltaNet(InferContext& ctx) {
  const Node& node = ctx.node();
  const DataType type = ctx.inputType(0);
  if (!isFloatingPoint(type))
    ctx.fail("query must be a float tensor, got " + dataTypeName(type),
             ErrorCode::kUnsupportedNode);
  const std::string rule = attrString(node, "update_rule", "gated_delta");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    ctx.fail("update_rule must be linear, gated, delta or gated_delta, got '" + rule + "'");
  const std::string gate = attrString(node, "gate_activation", "none");
  if (gate != "none" && gate != "softplus" && gate != "qwen" && gate != "sigmoid" && gate != "kda")
    ctx.fail("gate_activation must be none, softplus, qwen, sigmoid or kda, got '" + gate + "'");
  const std::string betaActivation = attrString(node, "beta_activation", "none");
  if (betaActivation != "none" && betaActivation != "sigmoid")
    ctx.fail("beta_activation must be none or sigmoid, got '" + betaActivation + "'");
  const int64_t capacity = attrInt(node, "state_update_capacity", 0);
  if (capacity < 0 || capacity > 8)
    ctx.fail("state_update_capacity must be in [0, 8], got " + std::to_string(capacity));
  if (ctx.hasInput(1) != ctx.hasInput(2))
    ctx.fail("key and value must both be present or both be omitted");
  if (!ctx.hasInput(1) && !ctx.hasInput(6))
    ctx.fail("initial_state is required for packed QKV (it gives the head counts and sizes)");
  for (size_t i : {6, 7, 8}) {
    if (ctx.hasInput(i) && ctx.inputType(i) != DataType::kFloat32) {
      ctx.fail("initial_state, a_log and dt_bias must be float32, got " +
               dataTypeName(ctx.inputType(i)));
    }
  }
  for (size_t i : {4, 5}) {
    if (ctx.hasInput(i) && ctx.inputType(i) != DataType::kFloat32 && ctx.inputType(i) != type) {
      ctx.fail("decay and beta must be float32 or the query's type " + dataTypeName(type) +
               ", got " + dataTypeName(ctx.inputType(i)));
    }
  }
  if (ctx.hasInput(4) && ctx.hasInput(5) && ctx.inputType(4) != ctx.inputType(5)) {
    ctx.fail("decay and beta must have one element type, got " + dataTypeName(ctx.inputType(4)) +
             " and " + dataTypeName(ctx.inputType(5)));
  }
  for (size_t i : {3, 9, 10}) {
    if (ctx.hasInput(i) && ctx.inputType(i) != DataType::kInt32) {
      ctx.fail("cu_seqlens, capture_count and state_update_active must be int32, got " +
               dataTypeName(ctx.inputType(i)));
    }
  }
  ctx.setOutputType(0, type);
  if (const SymShape* state = ctx.hasInput(6) ? ctx.inputShape(6) : nullptr)
    ctx.setOutput(1, DataType::kFloat32, *state);
  else
    ctx.setOutputType(1, DataType::kFloat32);
  ctx.setOutputType(2, DataType::kFloat32);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "GatedDeltaNet", 1, 1000, inferGatedDeltaNet});

}  // namespace kiln::ir
