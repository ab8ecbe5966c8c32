// Shape rules of LinearAttention (opset 27): query (B, T, Hq * dk), key (B, T, Hkv * dk) and
// value (B, T, Hkv * dv) -> output (B, T, Hq * dv) and present_state (B, Hkv, dk, dv).
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferLinearAttention(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  if (!isFloatingPoint(type))
    ctx.fail("query must be a float tensor, got " + dataTypeName(type),
             ErrorCode::kUnsupportedNode);
  const std::string rule = attrString(ctx.node(), "update_rule", "gated_delta");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta") {
    ctx.fail("update_rule must be linear, gated, delta or gated_delta, got '" + rule + "'");
  }
  const int64_t qHeads = attrInt(ctx.node(), "q_num_heads"),
                kvHeads = attrInt(ctx.node(), "kv_num_heads");
  if (qHeads <= 0 || kvHeads <= 0 || qHeads % kvHeads != 0)
    ctx.fail("q_num_heads must be a positive multiple of kv_num_heads");
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
  const Dim& vHidden = (*v)[2];
  const Dim& kHidden = (*k)[2];
  const Dim dv = vHidden.isKnown() ? Dim::known(vHidden.value / kvHeads) : Dim::unknown();
  const Dim dk = kHidden.isKnown() ? Dim::known(kHidden.value / kvHeads) : Dim::unknown();
  ctx.setOutput(
      0, type,
      SymShape{(*q)[0], (*q)[1],
               productDims(ctx.node(), dv, qHeads, "the output width (dv x q_num_heads)")});
  ctx.setOutput(1, stateType, SymShape{(*q)[0], Dim::known(kvHeads), dk, dv});
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "LinearAttention", 27, 1000, inferLinearAttention});

}  // namespace kiln::ir
