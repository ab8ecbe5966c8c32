// Shape rules of Attention (opsets 23+): Q (B, Hq, S, Dk) or (B, S, Hq * Dk), K/V likewise with
// Hkv heads; past_key/past_value (B, Hkv, P, D) are prepended along the sequence axis.
// Outputs: Y like Q with V's head size, present_key/present_value (B, Hkv, P + L, D) and
// qk_matmul_output (B, Hq, S, P + L).
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

Dim divDim(const Dim& a, int64_t d) {
  return a.isKnown() && d > 0 ? Dim::known(a.value / d) : Dim::unknown();
}

void inferAttention(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  if (!isFloatingPoint(type))
    ctx.fail("Q must be a float tensor, got " + dataTypeName(type), ErrorCode::kUnsupportedNode);
  const SymShape* q = ctx.inputShape(0);
  const SymShape* k = ctx.inputShape(1);
  const SymShape* v = ctx.inputShape(2);
  if (!q || !k || !v) {
    for (size_t i = 0; i < 4; ++i) ctx.setOutputType(i, type);
    return;
  }
  if (q->size() != k->size() || q->size() != v->size() || (q->size() != 3 && q->size() != 4)) {
    ctx.fail("Q, K and V must all be 3-D or all 4-D");
  }
  const bool fourD = q->size() == 4;
  const int64_t qHeadsAttr = attrInt(ctx.node(), "q_num_heads", 0),
                kvHeadsAttr = attrInt(ctx.node(), "kv_num_heads", 0);
  if (!fourD && (qHeadsAttr <= 0 || kvHeadsAttr <= 0))
    ctx.fail("3-D inputs need q_num_heads and kv_num_heads");
  const Dim batch = (*q)[0];
  const Dim qSeq = fourD ? (*q)[2] : (*q)[1];
  const Dim kvSeq = fourD ? (*k)[2] : (*k)[1];
  const Dim qHeads = fourD ? (*q)[1] : Dim::known(qHeadsAttr);
  const Dim kvHeads = fourD ? (*k)[1] : Dim::known(kvHeadsAttr);
  const Dim dk = fourD ? (*k)[3] : divDim((*k)[2], kvHeadsAttr);
  const Dim dv = fourD ? (*v)[3] : divDim((*v)[2], kvHeadsAttr);
  Dim total = kvSeq;
  if (ctx.hasInput(4)) {
    const SymShape* past = ctx.inputShape(4);
    total = past && past->size() == 4
                ? sumDims(ctx.node(), (*past)[2], kvSeq, "the total sequence length")
                : Dim::unknown();
  }
  if (fourD)
    ctx.setOutput(0, type, SymShape{batch, qHeads, qSeq, dv});
  else
    ctx.setOutput(
        0, type,
        SymShape{batch, qSeq, productDims(ctx.node(), dv, qHeadsAttr, "the output's width")});
  ctx.setOutput(1, type, SymShape{batch, kvHeads, total, dk});
  ctx.setOutput(2, type, SymShape{batch, kvHeads, total, dv});
  ctx.setOutput(3, type, SymShape{batch, qHeads, qSeq, total});
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "Attention", 23, 1000, inferAttention});

}  // namespace kiln::ir
