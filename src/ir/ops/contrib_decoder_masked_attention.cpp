// Shape and type rules of com.microsoft DecoderMaskedMultiHeadAttention (version 1), the one-token
// decoding attention of onnxruntime's beam search exports (Whisper, GPT-2, T5), float32 or float16:
//   DecoderMaskedMultiHeadAttention(query [B, 1, D], key, value, [mask_index int32 [B, T]],
//       [attention_bias [B or 1, N or 1, 1, T]], [past_key [B, N, M, H]], [past_value],
//       [past_sequence_length int32], [beam_width int32], [cache_indirection int32 [B / W, W, L]],
//       [bias [2 D + Dv]])
//     -> output [B, 1, Dv], [present_key [B, N, M, H]], [present_value], [qk [B, N, 1, T]]
// Self-attention: key and value [B, 1, D] are written at row past_sequence_length of the shared
// past / present buffer (past_present_share_buffer = 1), T = past_sequence_length + 1. Cross-
// attention (no past, no present): key and value are the encoder's cache [B, N, L, H], T = L.
// The packed QKV form (no key) is not supported.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferDecoderMaskedMultiHeadAttention(InferContext& ctx) {
  ctx.requireInput(0);
  const Node& node = ctx.node();
  if (!ctx.hasInput(1) || !ctx.hasInput(2)) {
    ctx.fail(
        "key and value must be given (the packed QKV form is not supported by kiln's "
        "DecoderMaskedMultiHeadAttention)",
        ErrorCode::kUnsupportedNode);
  }
  const DataType type = ctx.inputType(0);
  if (type != DataType::kFloat32 && type != DataType::kFloat16) {
    ctx.fail("query must be float32 or float16, got " + dataTypeName(type),
             ErrorCode::kUnsupportedNode);
  }
  for (size_t i : {1, 2, 4, 5, 6, 10}) {
    if (ctx.hasInput(i) && ctx.inputType(i) != type)
      ctx.fail("input " + std::to_string(i) + " must have the query's type " + dataTypeName(type));
  }
  for (size_t i : {3, 7, 8, 9}) {
    if (ctx.hasInput(i) && ctx.inputType(i) != DataType::kInt32)
      ctx.fail("input " + std::to_string(i) + " must be int32");
  }
  const int64_t heads = attrInt(node, "num_heads", 0);
  if (heads <= 0) ctx.fail("attribute 'num_heads' must be positive");
  const bool self = ctx.hasInput(5);
  if (self != ctx.hasInput(6)) ctx.fail("past_key and past_value must be given together");
  const bool wantsPresent = (node.outputs.size() > 1 && node.outputs[1] != kNoValue) ||
                            (node.outputs.size() > 2 && node.outputs[2] != kNoValue);
  if (!self && wantsPresent)
    ctx.fail("present_key / present_value need past_key / past_value (the shared buffer)");
  if (self && attrInt(node, "past_present_share_buffer", 0) == 0)
    ctx.fail("past_key needs past_present_share_buffer = 1 (as onnxruntime's CPU kernel does)");
  if (!self && ctx.hasInput(4))
    ctx.fail("attention_bias is not supported in cross-attention (as in onnxruntime)");
  const bool qk = attrInt(node, "output_qk", 0) != 0;
  if (!qk && node.outputs.size() > 3 && node.outputs[3] != kNoValue)
    ctx.fail("output 'qk' needs attribute output_qk = 1");
  for (size_t i = 0; i < 4; ++i) ctx.setOutputType(i, type);
  const SymShape* q = ctx.inputShape(0);
  const SymShape* k = ctx.inputShape(1);
  const SymShape* v = ctx.inputShape(2);
  if (q && (q->size() != 3 || ((*q)[1].isKnown() && (*q)[1].value != 1)))
    ctx.fail("query must be [batch, 1, hidden], got " + symShapeToString(*q));
  const size_t kvRank = self ? 3 : 4;
  for (const SymShape* s : {k, v}) {
    if (s && s->size() != kvRank) {
      ctx.fail(std::string(self ? "with a past, key and value must be [batch, 1, hidden]"
                                : "without a past, key and value must be the cache [batch, "
                                  "num_heads, length, head size]") +
               ", got " + symShapeToString(*s));
    }
  }
  if (!q || !v) return;
  const Dim vHidden =
      self ? (*v)[2]
           : productDims(ctx.node(), (*v)[3], heads, "the output width (v head size x num_heads)");
  ctx.setOutput(0, type, SymShape{(*q)[0], (*q)[1], vHidden});
  if (self) {
    for (size_t i : {1, 2}) {
      if (const SymShape* past = ctx.inputShape(4 + i)) ctx.setOutput(i, type, *past);
    }
  }
  Dim total = !self && k ? (*k)[2] : Dim::unknown();
  ctx.setOutput(3, type, SymShape{(*q)[0], Dim::known(heads), Dim::known(1), total});
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "DecoderMaskedMultiHeadAttention", 1, 1000,
                         inferDecoderMaskedMultiHeadAttention});

}  // namespace kiln::ir
