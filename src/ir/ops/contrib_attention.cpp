// Shape and type rules of com.microsoft Attention, QAttention and MultiHeadAttention (version 1),
// the attention blocks ONNX Runtime's transformer optimizer (and its quantizer, QAttention) writes
// (float32; Attention and MultiHeadAttention also float16). Attention, for BERT-like models:
//   Attention(input [B, S, Hin], weights [Hin, 3 * hidden], [bias [3 * hidden]], [mask_index
//   int32],
//             [past], [attention_bias [B or 1, heads or 1, S, S]], [past_sequence_length])
//     -> output [B, S, hidden], [present]
// num_heads splits hidden; mask_index is [B] (keys past each batch entry's length masked), [B, T]
// or [B, S, T] (0 = masked); masked scores get mask_filter_value (-10000) as ONNX Runtime does.
// past [2, B, N, P, H] (the KV cache) is followed by the new keys and values in present [2, B, N,
// P + S, H], T = P + S; qkv_hidden_sizes gives Q, K and V widths (Q's and K's equal). kiln does
// not implement do_rotary (neither does onnxruntime's CPU kernel) nor past_present_share_buffer /
// past_sequence_length: such a node fails when it is loaded, naming the input or attribute.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void refuseInput(const InferContext& ctx, size_t i, const char* name, const char* what) {
  if (ctx.hasInput(i)) {
    ctx.fail(std::string("input '") + name + "' (" + what + ") is not supported by kiln's " +
                 ctx.node().opType,
             ErrorCode::kUnsupportedNode);
  }
}

// What Attention and QAttention share: the attributes kiln refuses, and output [B, S, v hidden]
// from input [B, S, Hin] and weights [Hin, q + k + v hidden]; with `past` (Attention's input 4;
// null: none) also present [2, B, N, P + S, H].
void inferAttentionBlock(InferContext& ctx, bool hasPresent, DataType type) {
  const Node& node = ctx.node();
  const std::string op = node.opType;
  if (!hasPresent && node.outputs.size() > 1 && node.outputs[1] != kNoValue) {
    ctx.fail("output 'present' (the KV cache) is not supported by kiln's " + op,
             ErrorCode::kUnsupportedNode);
  }
  for (const char* attr : {"do_rotary", "past_present_share_buffer"}) {
    if (attrInt(node, attr, 0) != 0) {
      ctx.fail(std::string("attribute '") + attr + "' = 1 is not supported by kiln's " + op +
                   (std::string(attr) == "do_rotary"
                        ? " (nor by onnxruntime's CPU kernel: MultiHeadAttention and "
                          "RotaryEmbedding run it)"
                        : ""),
               ErrorCode::kUnsupportedNode);
    }
  }
  const int64_t heads = attrInt(node, "num_heads", 0);
  if (heads <= 0) ctx.fail("attribute 'num_heads' must be positive");
  std::vector<int64_t> sizes;
  if (hasAttr(node, "qkv_hidden_sizes")) {
    sizes = attrInts(node, "qkv_hidden_sizes");
    if (sizes.size() != 3 || sizes[0] != sizes[1] || sizes[0] <= 0 || sizes[2] <= 0 ||
        sizes[0] % heads != 0 || sizes[2] % heads != 0) {
      ctx.fail("attribute 'qkv_hidden_sizes' must be 3 positive multiples of num_heads " +
               std::to_string(heads) + ", Q's and K's equal");
    }
  }
  const SymShape* x = ctx.inputShape(0);
  const SymShape* w = ctx.inputShape(1);
  if (x && x->size() != 3)
    ctx.fail("input must be 3-D [batch, sequence, input_hidden], got " + symShapeToString(*x));
  if (w && w->size() != 2)
    ctx.fail("weights must be 2-D [input_hidden, q + k + v hidden], got " + symShapeToString(*w));
  Dim qHidden = sizes.empty() ? Dim::unknown() : Dim::known(sizes[0]);
  Dim vHidden = sizes.empty() ? Dim::unknown() : Dim::known(sizes[2]);
  if (w && (*w)[1].isKnown()) {
    const int64_t width = (*w)[1].value;
    if (sizes.empty() && (width % 3 != 0 || width / 3 % heads != 0)) {  // 3 * heads may overflow
      ctx.fail("weights " + symShapeToString(*w) +
               ": the width must be 3 * hidden with hidden a multiple of num_heads " +
               std::to_string(heads));
    }
    if (!sizes.empty() &&
        width != addDims(node, addDims(node, sizes[0], sizes[1], "the sum of qkv_hidden_sizes"),
                         sizes[2], "the sum of qkv_hidden_sizes")) {
      ctx.fail("weights " + symShapeToString(*w) +
               ": the width must be the sum of qkv_hidden_sizes");
    }
    if (sizes.empty()) qHidden = vHidden = Dim::known(width / 3);
  }
  if (x && w && (*x)[2].isKnown() && (*w)[0].isKnown() && (*x)[2].value != (*w)[0].value) {
    ctx.fail("input " + symShapeToString(*x) + " and weights " + symShapeToString(*w) +
             " differ in input_hidden");
  }
  if (!x) {
    ctx.setOutputType(0, type);
    if (hasPresent) ctx.setOutputType(1, type);
    return;
  }
  ctx.setOutput(0, type, SymShape{(*x)[0], (*x)[1], vHidden});
  if (!hasPresent || node.outputs.size() < 2 || node.outputs[1] == kNoValue) return;
  if (qHidden.isKnown() && vHidden.isKnown() && qHidden.value != vHidden.value) {
    ctx.fail("output 'present' needs equal K and V widths, got qkv_hidden_sizes K " +
             qHidden.toString() + ", V " + vHidden.toString());
  }
  const SymShape* past = ctx.hasInput(4) ? ctx.inputShape(4) : nullptr;
  if (past && past->size() != 5)
    ctx.fail("past must be 5-D [2, batch, num_heads, past length, head size], got " +
             symShapeToString(*past));
  const Dim P = ctx.hasInput(4) ? (past ? (*past)[3] : Dim::unknown()) : Dim::known(0);
  const Dim head = qHidden.isKnown() ? Dim::known(qHidden.value / heads) : Dim::unknown();
  ctx.setOutput(1, type,
                SymShape{Dim::known(2), (*x)[0], Dim::known(heads),
                         sumDims(node, P, (*x)[1], "present's length"), head});
}

// The float type T of an attention op: input 0's, float32 or float16, and that of `sameType`.
DataType attentionType(const InferContext& ctx, std::initializer_list<size_t> sameType) {
  const DataType type = ctx.inputType(0);
  if (type != DataType::kFloat32 && type != DataType::kFloat16) {
    ctx.fail("input 0 must be float32 or float16 (kiln implements " + ctx.node().opType +
                 " for these), got " + dataTypeName(type),
             ErrorCode::kUnsupportedNode);
  }
  for (size_t i : sameType) {
    if (ctx.hasInput(i) && ctx.inputType(i) != type) {
      ctx.fail("input " + std::to_string(i) + " must have input 0's type " + dataTypeName(type) +
               ", got " + dataTypeName(ctx.inputType(i)));
    }
  }
  return type;
}

void requireType(const InferContext& ctx, size_t i, DataType type, const char* what) {
  if (ctx.hasInput(i) && ctx.inputType(i) != type) {
    ctx.fail("input " + std::to_string(i) + " must be " + what + ", got " +
                 dataTypeName(ctx.inputType(i)),
             ErrorCode::kUnsupportedNode);
  }
}

void inferContribAttention(InferContext& ctx) {
  for (size_t i = 0; i < 2; ++i) ctx.requireInput(i);
  const DataType type = attentionType(ctx, {1, 2, 4, 5});
  if (ctx.hasInput(3) && ctx.inputType(3) != DataType::kInt32) ctx.fail("mask_index must be int32");
  refuseInput(ctx, 6, "past_sequence_length", "a shared past / present buffer");
  if (ctx.hasInput(4) && ctx.hasInput(5))
    ctx.fail("past and attention_bias cannot be given together (as in onnxruntime)");
  inferAttentionBlock(ctx, true, type);
}

// QAttention(input 8-bit, weight 8-bit, bias, input_scale, weight_scale, [mask_index],
// [input_zero_point], [weight_zero_point], [past]): Attention on the dequantized projection
// (input - zp) x (weight - zp) * input_scale * weight_scale + bias.
void inferQAttention(InferContext& ctx) {
  for (size_t i = 0; i < 5; ++i) ctx.requireInput(i);
  for (size_t i : {0, 1}) {
    const DataType t = ctx.inputType(i);
    if (t != DataType::kInt8 && t != DataType::kUint8)
      ctx.fail("input " + std::to_string(i) + " must be int8 or uint8");
    if (ctx.hasInput(i + 6) && ctx.inputType(i + 6) != t)
      ctx.fail("a zero point must have its operand's type");
  }
  for (size_t i : {2, 3, 4})
    requireType(ctx, i, DataType::kFloat32, "float32 (kiln implements QAttention for float32)");
  if (ctx.hasInput(5) && ctx.inputType(5) != DataType::kInt32) ctx.fail("mask_index must be int32");
  refuseInput(ctx, 8, "past", "the KV cache");
  inferAttentionBlock(ctx, false, DataType::kFloat32);
}

// MultiHeadAttention(query [B, S, D], key [B, L, D], value [B, L, Dv], [bias [2 D + Dv]],
// [key_padding_mask int32], [attention_bias], [past_key [B, N, P, H]], [past_value [B, N, P, Hv]])
// -> output [B, S, Dv], [present_key [B, N, P + L, H]], [present_value], [qk [B, N, S, P + L]];
// key and value may instead be 4-D [B, N, L, H] (a cross-attention's cache; no past then). The
// packed forms (query alone or with a packed key), past_sequence_length and cache_indirection are
// not supported (onnxruntime's CPU kernel runs none of the packed forms either).
void inferMultiHeadAttention(InferContext& ctx) {
  for (size_t i = 0; i < 3; ++i) {
    if (!ctx.hasInput(i)) {
      ctx.fail(
          "query, key and value must all be given (the packed forms are not supported, as in "
          "onnxruntime's CPU kernel)",
          ErrorCode::kUnsupportedNode);
    }
  }
  const DataType type = attentionType(ctx, {1, 2, 3, 5, 6, 7});
  if (ctx.hasInput(4) && ctx.inputType(4) != DataType::kInt32)
    ctx.fail("key_padding_mask must be int32");
  refuseInput(ctx, 8, "past_sequence_length", "a shared past / present buffer");
  refuseInput(ctx, 9, "cache_indirection", "beam search's cache reordering");
  if (ctx.hasInput(6) != ctx.hasInput(7))
    ctx.fail("past_key and past_value must be given together");
  const int64_t heads = attrInt(ctx.node(), "num_heads", 0);
  if (heads <= 0) ctx.fail("attribute 'num_heads' must be positive");
  const SymShape* q = ctx.inputShape(0);
  const SymShape* k = ctx.inputShape(1);
  const SymShape* v = ctx.inputShape(2);
  if (q && q->size() != 3) {
    ctx.fail("query must be 3-D [batch, length, num_heads * head size], got " +
                 symShapeToString(*q) + " (the packed forms are not supported)",
             ErrorCode::kUnsupportedNode);
  }
  const bool bnsh = k && k->size() == 4;
  for (const SymShape* s : {k, v}) {
    if (s && s->size() != 3 && s->size() != 4) {
      ctx.fail(
          "key and value must be 3-D [batch, length, num_heads * head size] or 4-D [batch, "
          "num_heads, length, head size], got " +
              symShapeToString(*s) + " (the packed forms are not supported)",
          ErrorCode::kUnsupportedNode);
    }
  }
  if (k && v && k->size() != v->size()) ctx.fail("key and value must have the same rank");
  if (bnsh && ctx.hasInput(6))
    ctx.fail("past_key cannot follow a 4-D key and value (the cache itself)");
  for (size_t i = 0; i < 4; ++i) ctx.setOutputType(i, type);
  if (!q || !k || !v) return;
  auto divided = [heads](const Dim& d) {
    return d.isKnown() ? Dim::known(d.value / heads) : Dim::unknown();
  };
  const Dim head = divided((*q)[2]);
  const Dim vHead = bnsh ? (*v)[3] : divided((*v)[2]);
  Dim total = bnsh ? (*k)[2] : (*k)[1];
  if (ctx.hasInput(6)) {
    const SymShape* past = ctx.inputShape(6);
    if (past && past->size() != 4)
      ctx.fail("past_key must be 4-D [batch, num_heads, past length, head size], got " +
               symShapeToString(*past));
    total = sumDims(ctx.node(), past ? (*past)[2] : Dim::unknown(), total, "present's length");
  }
  const Dim vHidden =
      productDims(ctx.node(), vHead, heads, "the output width (v head size x num_heads)");
  ctx.setOutput(0, type, SymShape{(*q)[0], (*q)[1], vHidden});
  ctx.setOutput(1, type, SymShape{(*q)[0], Dim::known(heads), total, head});
  ctx.setOutput(2, type, SymShape{(*q)[0], Dim::known(heads), total, vHead});
  ctx.setOutput(3, type, SymShape{(*q)[0], Dim::known(heads), (*q)[1], total});
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "Attention", 1, 1000, inferContribAttention});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "MultiHeadAttention", 1, 1000, inferMultiHeadAttention});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QAttention", 1, 1000, inferQAttention});

}  // namespace kiln::ir
