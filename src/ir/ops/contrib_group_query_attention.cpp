// Shape and type rules of com.microsoft GroupQueryAttention (version 1), the attention of the LLMs
// onnxruntime-genai exports (Phi, Llama, Qwen, Mistral), float32 or float16:
//   GroupQueryAttention(query [B, S, N * H] (or Q, K and V packed: [B, S, (N + 2 Nkv) * H]),
//                       [key [B, S, Nkv * H]], [value], [past_key [B, Nkv, P, H]], [past_value],
//                       seqlens_k int32 [B], total_sequence_length int32 (one value),
//                       [cos_cache [M, R / 2]], [sin_cache], [position_ids int64 [B, S]],
//                       [attention_bias [B or 1, N or 1, S, T]], [head_sink [N]])
//     -> output [B, S, N * H], [present_key [B, Nkv, max(T, P), H]], [present_value],
//        [output_qk [B, N, S, T]]
// T is total_sequence_length's value, so the present's length is known only when it is. kiln
// refuses the quantized KV cache (k_scale, v_scale, 8- and 4-bit caches), the Q / K RMS norms
// (q_norm_weight, k_norm_weight), query_seqlens and sliding_window_cache by name.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void refuseGqaInput(const InferContext& ctx, size_t i, const char* name, const char* what) {
  if (ctx.hasInput(i)) {
    ctx.fail(std::string("input '") + name + "' (" + what +
                 ") is not supported by kiln's GroupQueryAttention",
             ErrorCode::kUnsupportedNode);
  }
}

void refuseGqaAttributes(const InferContext& ctx) {
  const Node& node = ctx.node();
  if (attrInt(node, "sliding_window_cache", 0) != 0) {
    ctx.fail("attribute 'sliding_window_cache' = 1 is not supported by kiln's GroupQueryAttention",
             ErrorCode::kUnsupportedNode);
  }
  for (const char* attr : {"k_quant_type", "v_quant_type"}) {
    if (hasAttr(node, attr) && attrString(node, attr) != "NONE") {
      ctx.fail(std::string("attribute '") + attr + "' = " + attrString(node, attr) +
                   " (a quantized KV cache) is not supported by kiln's GroupQueryAttention",
               ErrorCode::kUnsupportedNode);
    }
  }
}

// num_heads and kv_num_heads, checked, and key and value given together (neither: packed QKV).
std::pair<int64_t, int64_t> groupedHeads(const InferContext& ctx) {
  if (ctx.hasInput(1) != ctx.hasInput(2))
    ctx.fail("key and value must be given together (or neither: Q, K and V packed in query)");
  const Node& node = ctx.node();
  const int64_t heads = attrInt(node, "num_heads", 0), kvHeads = attrInt(node, "kv_num_heads", 0);
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0) {
    ctx.fail("attributes 'num_heads' " + std::to_string(heads) + " and 'kv_num_heads' " +
             std::to_string(kvHeads) + " must be positive, num_heads a multiple of kv_num_heads");
  }
  return {heads, kvHeads};
}

// The head size of query q [B, S, N * H] or, without key, [B, S, (N + 2 Nkv) * H].
Dim queryHeadSize(const InferContext& ctx, const SymShape& q, int64_t heads, int64_t kvHeads) {
  if (!q[2].isKnown()) return Dim::unknown();
  const bool packed = !ctx.hasInput(1);
  const int64_t parts =
      packed ? addDims(ctx.node(), heads, multiplyDims(ctx.node(), 2, kvHeads, "2 x kv_num_heads"),
                       "num_heads + 2 x kv_num_heads")
             : heads;
  if (q[2].value % parts != 0) {
    ctx.fail("query " + symShapeToString(q) + ": the hidden size must be a multiple of " +
             std::to_string(parts) + (packed ? " (num_heads + 2 * kv_num_heads)" : " (num_heads)"));
  }
  return Dim::known(q[2].value / parts);
}

// Sets the type of the node's `outputs` outputs, output 0's shape [B, S, N * H] and *head (H);
// returns query's shape (null when it is unknown: only the types are set then).
const SymShape* inferOutput(InferContext& ctx, DataType type, size_t outputs, int64_t heads,
                            int64_t kvHeads, Dim* head) {
  const SymShape* q = ctx.inputShape(0);
  if (q && q->size() != 3)
    ctx.fail("query must be 3-D [batch, sequence, hidden], got " + symShapeToString(*q));
  for (size_t i = 0; i < outputs; ++i) ctx.setOutputType(i, type);
  if (!q) return nullptr;
  *head = queryHeadSize(ctx, *q, heads, kvHeads);
  const Dim hidden =
      productDims(ctx.node(), *head, heads, "the output width (head size x num_heads)");
  ctx.setOutput(0, type, SymShape{(*q)[0], (*q)[1], hidden});
  return q;
}

void inferGroupQueryAttention(InferContext& ctx) {
  for (size_t i : {0, 5, 6}) ctx.requireInput(i);
  refuseGqaInput(ctx, 12, "k_scale", "a quantized KV cache");
  refuseGqaInput(ctx, 13, "v_scale", "a quantized KV cache");
  refuseGqaInput(ctx, 14, "q_norm_weight", "the per-head RMS norm of Q and K");
  refuseGqaInput(ctx, 15, "k_norm_weight", "the per-head RMS norm of Q and K");
  refuseGqaInput(ctx, 16, "query_seqlens", "right-padded chunks");
  refuseGqaAttributes(ctx);
  const DataType type = ctx.inputType(0);
  if (type != DataType::kFloat32 && type != DataType::kFloat16) {
    ctx.fail(
        "query must be float32 or float16 (kiln implements GroupQueryAttention for these), "
        "got " +
            dataTypeName(type),
        ErrorCode::kUnsupportedNode);
  }
  for (size_t i : {1, 2, 3, 4, 7, 8, 10, 11}) {
    if (ctx.hasInput(i) && ctx.inputType(i) != type) {
      ctx.fail("input " + std::to_string(i) + " must have the query's type " + dataTypeName(type) +
                   ", got " + dataTypeName(ctx.inputType(i)) +
                   (i == 3 || i == 4 ? " (kiln has no quantized KV cache)" : ""),
               ErrorCode::kUnsupportedNode);
    }
  }
  for (size_t i : {5, 6}) {
    if (ctx.inputType(i) != DataType::kInt32)
      ctx.fail(std::string(i == 5 ? "seqlens_k" : "total_sequence_length") + " must be int32");
  }
  if (ctx.hasInput(9) && ctx.inputType(9) != DataType::kInt64)
    ctx.fail("position_ids must be int64");
  if (ctx.hasInput(3) != ctx.hasInput(4))
    ctx.fail("past_key and past_value must be given together");
  if (ctx.hasInput(7) != ctx.hasInput(8))
    ctx.fail("cos_cache and sin_cache must be given together");
  const Node& node = ctx.node();
  const auto [heads, kvHeads] = groupedHeads(ctx);
  if (attrInt(node, "do_rotary", 0) != 0 && !ctx.hasInput(7))
    ctx.fail("do_rotary = 1 needs cos_cache and sin_cache");
  const int64_t qkOutput = attrInt(node, "qk_output", 0);
  if (qkOutput < 0 || qkOutput > 2) ctx.fail("attribute 'qk_output' must be 0, 1 or 2");
  if (node.outputs.size() > 3 && node.outputs[3] != kNoValue && qkOutput == 0)
    ctx.fail("output 'output_qk' needs qk_output 1 (before the softmax) or 2 (after)");
  if (attrInt(node, "causal", 1) == 0 && attrInt(node, "local_window_size", -1) != -1)
    ctx.fail("local_window_size must be -1 when causal is 0");
  Dim head;
  const SymShape* q = inferOutput(ctx, type, 4, heads, kvHeads, &head);
  if (!q) return;
  Dim total = Dim::unknown();
  if (const auto value = ctx.inputInts(6); value && value->size() == 1)
    total = Dim::known((*value)[0]);
  Dim present = total;
  if (ctx.hasInput(3)) {
    const SymShape* past = ctx.inputShape(3);
    if (past && past->size() != 4)
      ctx.fail("past_key must be 4-D [batch, kv_num_heads, past length, head size], got " +
               symShapeToString(*past));
    const Dim pastLength = past ? (*past)[2] : Dim::unknown();
    present = total.isKnown() && pastLength.isKnown()
                  ? Dim::known(std::max(total.value, pastLength.value))
                  : Dim::unknown();
  }
  for (size_t i : {1, 2})
    ctx.setOutput(i, type, SymShape{(*q)[0], Dim::known(kvHeads), present, head});
  ctx.setOutput(3, type, SymShape{(*q)[0], Dim::known(heads), (*q)[1], total});
}

// com.microsoft SparseAttention (version 1, Phi-3-small's block-sparse attention), float32 or
// float16: GroupQueryAttention's inputs in another order, past_key / past_value [B, Nkv, M, H]
// required (the buffer the present updates: present_key / present_value have its shape),
//   (query, [key], [value], past_key, past_value, block_row_indices int32 [layouts, max blocks +
//    1], block_col_indices int32 [layouts, max nonzero], total_sequence_length int32,
//    key_total_sequence_lengths int32 [B], [cos_cache], [sin_cache]) -> output [B, S, N * H],
//   present_key, present_value.
void inferSparseAttention(InferContext& ctx) {
  for (size_t i : {0, 3, 4, 5, 6, 7, 8}) ctx.requireInput(i);
  const DataType type = ctx.inputType(0);
  if (type != DataType::kFloat32 && type != DataType::kFloat16) {
    ctx.fail("query must be float32 or float16 (kiln implements SparseAttention for these), got " +
                 dataTypeName(type),
             ErrorCode::kUnsupportedNode);
  }
  for (size_t i : {1, 2, 3, 4, 9, 10}) {
    if (ctx.hasInput(i) && ctx.inputType(i) != type)
      ctx.fail("input " + std::to_string(i) + " must have the query's type " + dataTypeName(type));
  }
  for (size_t i : {5, 6, 7, 8}) {
    if (ctx.inputType(i) != DataType::kInt32)
      ctx.fail("input " + std::to_string(i) + " must be int32");
  }
  const Node& node = ctx.node();
  const auto [heads, kvHeads] = groupedHeads(ctx);
  if (attrInt(node, "sparse_block_size", 0) <= 0)
    ctx.fail("attribute 'sparse_block_size' must be positive");
  if (attrInt(node, "do_rotary", 0) != 0 && (!ctx.hasInput(9) || !ctx.hasInput(10)))
    ctx.fail("do_rotary = 1 needs cos_cache and sin_cache");
  Dim head;
  const SymShape* q = inferOutput(ctx, type, 3, heads, kvHeads, &head);
  if (!q) return;
  for (size_t i : {1, 2}) {
    if (const SymShape* past = ctx.inputShape(2 + i)) ctx.setOutput(i, type, *past);
  }
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "GroupQueryAttention", 1, 1000,
                         inferGroupQueryAttention});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "SparseAttention", 1, 1000, inferSparseAttention});

}  // namespace kiln::ir
