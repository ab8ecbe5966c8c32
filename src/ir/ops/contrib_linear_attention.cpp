// Shape rules of com.microsoft LinearAttention: query (B, T, Hq * dk), key (B, T, Hk * dk) with
// Hk dividing Hkv, value (B, T, Hkv * dv) -> output (B, T, max(Hq, Hkv) * dv) and present_state
// (B, Hkv, dk, dv). Hq < Hkv is inverse grouped-query attention: one output per key/value head.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferContribLinearAttention(InferContext& ctx) {
  const Node& node = ctx.node();
  const DataType type = ctx.inputType(0);
  if (!isFloatingPoint(type))
    ctx.fail("query must be a float tensor, got " + dataTypeName(type),
             ErrorCode::kUnsupportedNode);
  const std::string rule = attrString(node, "update_rule", "gated_delta");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    ctx.fail("update_rule must be linear, gated, delta or gated_delta, got '" + rule + "'");
  const int64_t window = attrInt(node, "state_window", 0);
  if (window < 0 || window > 8)
    ctx.fail("state_window must be in [0, 8], got " + std::to_string(window));
  if (window > 0) {
    ctx.fail("state_window " + std::to_string(window) +
                 " (per-token states) is not implemented (onnxruntime: CUDA only)",
             ErrorCode::kUnsupportedNode);
  }
  const int64_t qHeads = attrInt(node, "q_num_heads"), kvHeads = attrInt(node, "kv_num_heads");
  if (qHeads <= 0 || kvHeads <= 0) {
    ctx.fail("q_num_heads and kv_num_heads must be positive, got " + std::to_string(qHeads) +
             " and " + std::to_string(kvHeads));
  }
  if (std::max(qHeads, kvHeads) % std::min(qHeads, kvHeads) != 0) {
    ctx.fail("q_num_heads " + std::to_string(qHeads) + " and kv_num_heads " +
             std::to_string(kvHeads) + ": the larger must be a multiple of the other");
  }
  const SymShape* q = ctx.inputShape(0);
  const SymShape* k = ctx.inputShape(1);
  const SymShape* v = ctx.inputShape(2);
  for (const SymShape* s : {q, k, v}) {
    if (s && s->size() != 3)
      ctx.fail("query, key and value must be (B, T, H * D), got " + symShapeToString(*s));
  }
  const DataType stateType = ctx.hasInput(3) ? ctx.inputType(3) : type;
  if (!q || !k || !v) {
    ctx.setOutputType(0, type);
    ctx.setOutputType(1, stateType);
    return;
  }
  const Dim& qHidden = (*q)[2];
  const Dim& vHidden = (*v)[2];
  const Dim dk = qHidden.isKnown() ? Dim::known(qHidden.value / qHeads) : Dim::unknown();
  const Dim dv = vHidden.isKnown() ? Dim::known(vHidden.value / kvHeads) : Dim::unknown();
  ctx.setOutput(
      0, type,
      SymShape{(*q)[0], (*q)[1], productDims(node, dv, std::max(qHeads, kvHeads), "output dim 2")});
  ctx.setOutput(1, stateType, SymShape{(*q)[0], Dim::known(kvHeads), dk, dv});
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "LinearAttention", 1, 1000, inferContribLinearAttention});

}  // namespace kiln::ir
