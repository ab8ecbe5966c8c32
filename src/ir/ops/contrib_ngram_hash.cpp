// Shape and type rules of com.microsoft NGramHashMapping and VarlenNGramHashMapping (Engram n-gram
// hash ids, onnxruntime 1.32; kernels in backends/cpu/kernels/contrib_ngram_hash.cpp). With
// N = max_ngram_size, H = n_head_per_ngram and L = N - 1 ids of history:
//   NGramHashMapping(input_ids (B, S), multipliers (>= N), vocab_sizes ((N-1) H), [past_ids (B,
//   L)],
//                    [head_offsets ((N-1) H)], [eos_token_id ()], [segment_ids (B, S) int32])
//     -> hash_ids (B, S, (N-1) H), [present_ids (B, L)]
//   VarlenNGramHashMapping(input_ids (T), multipliers, vocab_sizes,
//                          cumulative_sequence_length (B + 1) int32, [past_ids (B, L)],
//                          [head_offsets], [eos_token_id], [segment_ids (T) int32],
//                          [past_segment_ids (B, L) int32], [capture_count (B) int32])
//     -> hash_ids (T, (N-1) H), [present_ids (B, L)], [present_segment_ids (B, L) int32],
//        [state_update (B, state_update_capacity, L)]
// The ids are int32 or int64, every id input of one type.
#include <limits>

#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

struct NGramAttrs {
  int64_t maxN, heads, totalHeads;
};

NGramAttrs ngramAttrs(const InferContext& ctx) {
  for (const char* name : {"max_ngram_size", "n_head_per_ngram", "pad_id"})
    if (!hasAttr(ctx.node(), name)) ctx.fail(std::string("the ") + name + " attribute is required");
  const int64_t maxN = attrInt(ctx.node(), "max_ngram_size");
  const int64_t heads = attrInt(ctx.node(), "n_head_per_ngram");
  if (maxN < 2) ctx.fail("max_ngram_size must be at least 2, got " + std::to_string(maxN));
  if (heads < 1) ctx.fail("n_head_per_ngram must be positive, got " + std::to_string(heads));
  return {maxN, heads, multiplyDims(ctx.node(), maxN - 1, heads, "(max_ngram_size - 1) * heads")};
}

void requireIdTypes(const InferContext& ctx, const std::initializer_list<size_t>& ids,
                    const std::initializer_list<size_t>& int32s, const char* const* names) {
  const DataType t = ctx.inputType(0);
  if (t != DataType::kInt32 && t != DataType::kInt64)
    ctx.fail("input_ids must be int32 or int64, got " + dataTypeName(t),
             ErrorCode::kUnsupportedNode);
  const int64_t pad = attrInt(ctx.node(), "pad_id");
  if (t == DataType::kInt32 &&
      (pad < std::numeric_limits<int32_t>::min() || pad > std::numeric_limits<int32_t>::max()))
    ctx.fail("pad_id " + std::to_string(pad) + " is out of range for int32 ids");
  for (size_t i : ids) {
    if (ctx.hasInput(i) && ctx.inputType(i) != t) {
      ctx.fail(std::string(names[i]) + " must have input_ids' type " + dataTypeName(t) + ", got " +
               dataTypeName(ctx.inputType(i)));
    }
  }
  for (size_t i : int32s) {
    if (ctx.hasInput(i) && ctx.inputType(i) != DataType::kInt32)
      ctx.fail(std::string(names[i]) + " must be int32, got " + dataTypeName(ctx.inputType(i)));
  }
}

/// Input i (when present with a known rank) is `want`, where both dims are known.
void requireShape(const InferContext& ctx, size_t i, const char* name, const SymShape& want) {
  const SymShape* s = ctx.hasInput(i) ? ctx.inputShape(i) : nullptr;
  if (!s) return;
  bool same = s->size() == want.size();
  for (size_t d = 0; same && d < s->size(); ++d)
    same = !((*s)[d].isKnown() && want[d].isKnown() && (*s)[d].value != want[d].value);
  if (!same) {
    ctx.fail(std::string(name) + " has shape " + symShapeToString(*s) + ", must be " +
             symShapeToString(want));
  }
}

/// multipliers (at least N values), vocab_sizes and head_offsets (one per output head), and the
/// scalar eos_token_id: inputs 1, 2 and the given head_offsets and eos_token_id indices.
void requireHashTables(const InferContext& ctx, const NGramAttrs& a, size_t offsets, size_t eos) {
  if (const SymShape* m = ctx.inputShape(1)) {
    if (m->size() != 1 || ((*m)[0].isKnown() && (*m)[0].value < a.maxN)) {
      ctx.fail("multipliers " + symShapeToString(*m) +
               " must be 1-D with at least max_ngram_size " + std::to_string(a.maxN) + " values");
    }
  }
  requireShape(ctx, 2, "vocab_sizes", {Dim::known(a.totalHeads)});
  requireShape(ctx, offsets, "head_offsets", {Dim::known(a.totalHeads)});
  requireShape(ctx, eos, "eos_token_id", {});
}

void inferNGramHashMapping(InferContext& ctx) {
  for (size_t i : {0, 1, 2}) ctx.requireInput(i);
  const char* names[] = {"input_ids",    "multipliers",  "vocab_sizes", "past_ids",
                         "head_offsets", "eos_token_id", "segment_ids"};
  requireIdTypes(ctx, {1, 2, 3, 4, 5}, {6}, names);
  const NGramAttrs a = ngramAttrs(ctx);
  requireHashTables(ctx, a, 4, 5);
  const DataType t = ctx.inputType(0);
  const SymShape* ids = ctx.inputShape(0);
  if (!ids) {
    ctx.setOutputType(0, t);
    if (ctx.numOutputs() > 1) ctx.setOutputType(1, t);
    return;
  }
  if (ids->size() != 2)
    ctx.fail("input_ids must be (batch, sequence), got " + symShapeToString(*ids));
  const Dim batch = (*ids)[0], state = Dim::known(a.maxN - 1);
  requireShape(ctx, 3, "past_ids", {batch, state});
  requireShape(ctx, 6, "segment_ids", *ids);
  if (batch.isKnown() && (*ids)[1].isKnown()) {
    multiplyDims(ctx.node(), multiplyDims(ctx.node(), batch.value, (*ids)[1].value, "tokens"),
                 a.totalHeads, "hash_ids' element count");
  }
  ctx.setOutput(0, t, {batch, (*ids)[1], Dim::known(a.totalHeads)});
  if (ctx.numOutputs() > 1) ctx.setOutput(1, t, {batch, state});
}

bool wants(const InferContext& ctx, size_t i) {
  return i < ctx.node().outputs.size() && ctx.node().outputs[i] != kNoValue;
}

void inferVarlenNGramHashMapping(InferContext& ctx) {
  for (size_t i : {0, 1, 2, 3}) ctx.requireInput(i);
  const char* names[] = {
      "input_ids",    "multipliers",  "vocab_sizes", "cumulative_sequence_length", "past_ids",
      "head_offsets", "eos_token_id", "segment_ids", "past_segment_ids",           "capture_count"};
  requireIdTypes(ctx, {1, 2, 4, 5, 6}, {3, 7, 8, 9}, names);
  const NGramAttrs a = ngramAttrs(ctx);
  requireHashTables(ctx, a, 5, 6);
  const int64_t capacity = attrInt(ctx.node(), "state_update_capacity", 0);
  if (capacity < 0 || capacity > 8)
    ctx.fail("state_update_capacity must be in [0, 8], got " + std::to_string(capacity));
  if ((capacity > 0) != ctx.hasInput(9)) {
    ctx.fail("capture_count must be given exactly when state_update_capacity is positive (it is " +
             std::to_string(capacity) + ")");
  }
  if (!ctx.hasInput(7) && ctx.hasInput(8)) ctx.fail("past_segment_ids needs the segment_ids input");
  if (!ctx.hasInput(7) && wants(ctx, 2))
    ctx.fail("the present_segment_ids output needs the segment_ids input");
  const DataType t = ctx.inputType(0);
  const SymShape* ids = ctx.inputShape(0);
  const SymShape* cu = ctx.inputShape(3);
  if (ids && ids->size() != 1)
    ctx.fail("input_ids must be 1-D (total_tokens), got " + symShapeToString(*ids));
  if (cu && cu->size() != 1) {
    ctx.fail("cumulative_sequence_length must be 1-D (batch + 1), got " + symShapeToString(*cu));
  }
  if (cu && (*cu)[0].isKnown() && (*cu)[0].value < 2) {
    ctx.fail("cumulative_sequence_length must hold at least 2 values (batch + 1), got " +
             std::to_string((*cu)[0].value));
  }
  const Dim tokens = ids ? (*ids)[0] : Dim::unknown();
  const Dim batch = cu && (*cu)[0].isKnown() ? Dim::known((*cu)[0].value - 1) : Dim::unknown();
  const Dim state = Dim::known(a.maxN - 1);
  if (tokens.isKnown() && batch.isKnown() && tokens.value < batch.value) {
    ctx.fail("input_ids' " + std::to_string(tokens.value) + " tokens are fewer than the " +
             std::to_string(batch.value) + " requests (each holds one or more)");
  }
  requireShape(ctx, 4, "past_ids", {batch, state});
  requireShape(ctx, 7, "segment_ids", {tokens});
  requireShape(ctx, 8, "past_segment_ids", {batch, state});
  requireShape(ctx, 9, "capture_count", {batch});
  if (tokens.isKnown()) multiplyDims(ctx.node(), tokens.value, a.totalHeads, "hash_ids' elements");
  ctx.setOutput(0, t, {tokens, Dim::known(a.totalHeads)});
  if (ctx.numOutputs() > 1) ctx.setOutput(1, t, {batch, state});
  if (ctx.numOutputs() > 2) ctx.setOutput(2, DataType::kInt32, {batch, state});
  if (ctx.numOutputs() > 3) ctx.setOutput(3, t, {batch, Dim::known(capacity), state});
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "NGramHashMapping", 1, 1000, inferNGramHashMapping});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "VarlenNGramHashMapping", 1, 1000,
                         inferVarlenNGramHashMapping});

}  // namespace kiln::ir
