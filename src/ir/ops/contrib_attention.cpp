// Shape and type rules of com.microsoft Attention, QAttention and MultiHeadAttention (version 1),
// the attention blocks ONNX Runtime's transformer optimizer (and its quantizer, QAttention) writes
// (float32). Attention, for BERT-like models:
//   Attention(input [B, S, Hin], weights [Hin, 3 * hidden], [bias [3 * hidden]], [mask_index
//   int32],
//             [past], [attention_bias [B or 1, heads or 1, S, S]], [past_sequence_length])
//     -> output [B, S, hidden], [present]
// num_heads splits hidden; mask_index is [B] (keys past each batch entry's length masked), [B, S]
// or [B, S, S] (0 = masked); masked scores get mask_filter_value (-10000) as ONNX Runtime does.
// kiln does not implement past / present (KV cache), qkv_hidden_sizes of different sizes, or
// do_rotary: such a node fails when it is loaded, naming the input or attribute.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void refuseInput(const InferContext& ctx, size_t i, const char* name) {
  if (ctx.hasInput(i)) {
    ctx.fail(std::string("input '") + name + "' (the KV cache) is not supported by kiln's " +
                 ctx.node().opType,
             ErrorCode::kUnsupportedNode);
  }
}

// What Attention and QAttention share: the attributes kiln refuses, and output [B, S, hidden]
// from input [B, S, Hin] and weights [Hin, 3 * hidden].
void inferAttentionBlock(InferContext& ctx) {
  const Node& node = ctx.node();
  const std::string op = node.opType;
  if (node.outputs.size() > 1 && node.outputs[1] != kNoValue) {
    ctx.fail("output 'present' (the KV cache) is not supported by kiln's " + op,
             ErrorCode::kUnsupportedNode);
  }
  for (const char* attr : {"do_rotary", "past_present_share_buffer"}) {
    if (attrInt(node, attr, 0) != 0) {
      ctx.fail(std::string("attribute '") + attr + "' = 1 is not supported by kiln's " + op,
               ErrorCode::kUnsupportedNode);
    }
  }
  const int64_t heads = attrInt(node, "num_heads", 0);
  if (heads <= 0) ctx.fail("attribute 'num_heads' must be positive");
  if (hasAttr(node, "qkv_hidden_sizes")) {
    const std::vector<int64_t> sizes = attrInts(node, "qkv_hidden_sizes");
    if (sizes.size() != 3 || sizes[0] != sizes[1] || sizes[1] != sizes[2]) {
      ctx.fail(
          "attribute 'qkv_hidden_sizes' with different Q, K and V sizes is not supported by "
          "kiln's " +
              op,
          ErrorCode::kUnsupportedNode);
    }
  }
  const SymShape* x = ctx.inputShape(0);
  const SymShape* w = ctx.inputShape(1);
  if (x && x->size() != 3)
    ctx.fail("input must be 3-D [batch, sequence, input_hidden], got " + symShapeToString(*x));
  if (w && w->size() != 2)
    ctx.fail("weights must be 2-D [input_hidden, 3 * hidden], got " + symShapeToString(*w));
  Dim hidden = Dim::unknown();
  if (w && (*w)[1].isKnown()) {
    if ((*w)[1].value % (3 * heads) != 0) {
      ctx.fail("weights " + symShapeToString(*w) +
               ": the width must be 3 * hidden with hidden a multiple of num_heads " +
               std::to_string(heads));
    }
    hidden = Dim::known((*w)[1].value / 3);
  }
  if (x && w && (*x)[2].isKnown() && (*w)[0].isKnown() && (*x)[2].value != (*w)[0].value) {
    ctx.fail("input " + symShapeToString(*x) + " and weights " + symShapeToString(*w) +
             " differ in input_hidden");
  }
  if (!x) return ctx.setOutputType(0, DataType::kFloat32);
  ctx.setOutput(0, DataType::kFloat32, SymShape{(*x)[0], (*x)[1], hidden});
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
  for (size_t i : {0, 1, 2, 5})
    requireType(ctx, i, DataType::kFloat32, "float32 (kiln implements Attention for float32)");
  if (ctx.hasInput(3) && ctx.inputType(3) != DataType::kInt32) ctx.fail("mask_index must be int32");
  refuseInput(ctx, 4, "past");
  refuseInput(ctx, 6, "past_sequence_length");
  inferAttentionBlock(ctx);
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
  refuseInput(ctx, 8, "past");
  inferAttentionBlock(ctx);
}

// MultiHeadAttention(query [B, S, D], key [B, L, D], value [B, L, Dv], [bias [2 D + Dv]],
// [key_padding_mask int32], [attention_bias]) -> output [B, S, Dv]: the projected form only
// (no packed QKV, no 4-D key / value, no past / present KV cache, no qk output).
void inferMultiHeadAttention(InferContext& ctx) {
  for (size_t i = 0; i < 3; ++i) {
    if (!ctx.hasInput(i)) {
      ctx.fail("query, key and value must all be given (the packed forms are not supported)",
               ErrorCode::kUnsupportedNode);
    }
  }
  for (size_t i : {0, 1, 2, 3, 5}) {
    if (ctx.hasInput(i) && ctx.inputType(i) != DataType::kFloat32) {
      ctx.fail("input " + std::to_string(i) +
                   " must be float32 (kiln implements MultiHeadAttention for float32), got " +
                   dataTypeName(ctx.inputType(i)),
               ErrorCode::kUnsupportedNode);
    }
  }
  if (ctx.hasInput(4) && ctx.inputType(4) != DataType::kInt32)
    ctx.fail("key_padding_mask must be int32");
  for (size_t i = 6; i < ctx.numInputs(); ++i) {
    if (ctx.hasInput(i))
      ctx.fail("input " + std::to_string(i) + " (the KV cache) is not supported",
               ErrorCode::kUnsupportedNode);
  }
  for (size_t i = 1; i < ctx.node().outputs.size(); ++i) {
    if (ctx.node().outputs[i] != kNoValue) {
      ctx.fail("output " + std::to_string(i) + " (present key / value, qk) is not supported",
               ErrorCode::kUnsupportedNode);
    }
  }
  const int64_t heads = attrInt(ctx.node(), "num_heads", 0);
  if (heads <= 0) ctx.fail("attribute 'num_heads' must be positive");
  const SymShape* q = ctx.inputShape(0);
  const SymShape* v = ctx.inputShape(2);
  for (size_t i = 0; i < 3; ++i) {
    const SymShape* s = ctx.inputShape(i);
    if (s && s->size() != 3) {
      ctx.fail("input " + std::to_string(i) +
                   " must be 3-D [batch, length, num_heads * head size], got " +
                   symShapeToString(*s),
               ErrorCode::kUnsupportedNode);
    }
  }
  if (!q) return ctx.setOutputType(0, DataType::kFloat32);
  ctx.setOutput(0, DataType::kFloat32, SymShape{(*q)[0], (*q)[1], v ? (*v)[2] : Dim::unknown()});
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "Attention", 1, 1000, inferContribAttention});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "MultiHeadAttention", 1, 1000, inferMultiHeadAttention});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QAttention", 1, 1000, inferQAttention});

}  // namespace kiln::ir
