// Shape and type rules of com.microsoft's token and sequence ops (version 1):
//   NGramRepeatBlock     input_ids [B, L] int64, scores [B, V] float32 -> scores_out [B, V]
//   BifurcationDetector  src_tokens [S], cur_tokens [C], prev_suffix_match_idx, pred_tokens
//                        (optional) int64 -> tokens [?], suffix_match_idx (prev's shape)
//   DynamicTimeWarping   cost [M, N] or [1, M, N] float32 -> path [2, ?] int32
//   WordConvEmbedding    Sequence [S, W] int32, W [F, 1, K, E], B [F], C [V, E] float32 -> [S, F]
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void requireDtype(const InferContext& ctx, size_t i, const char* name, DataType t) {
  if (ctx.inputType(i) != t)
    ctx.fail(std::string(name) + " must be " + dataTypeName(t) + ", got " +
                 dataTypeName(ctx.inputType(i)),
             ErrorCode::kUnsupportedNode);
}

void requireRank(const InferContext& ctx, size_t i, const char* name, size_t rank,
                 const char* form) {
  const SymShape* s = ctx.inputShape(i);
  if (s && s->size() != rank)
    ctx.fail(std::string(name) + " must be " + form + ", got " + symShapeToString(*s));
}

void inferNGramRepeatBlock(InferContext& ctx) {
  requireDtype(ctx, 0, "input_ids", DataType::kInt64);
  requireDtype(ctx, 1, "scores", DataType::kFloat32);
  requireRank(ctx, 0, "input_ids", 2, "[batch, length]");
  requireRank(ctx, 1, "scores", 2, "[batch, vocab]");
  if (!hasAttr(ctx.node(), "ngram_size") || attrInt(ctx.node(), "ngram_size") < 1)
    ctx.fail("attribute 'ngram_size' must be given and positive");
  if (const SymShape* s = ctx.inputShape(1)) {
    ctx.setOutput(0, DataType::kFloat32, *s);
  } else {
    ctx.setOutputType(0, DataType::kFloat32);
  }
}

void inferBifurcationDetector(InferContext& ctx) {
  const char* names[] = {"src_tokens", "cur_tokens", "prev_suffix_match_idx", "pred_tokens"};
  for (size_t i = 0; i < 4; ++i) {
    if (i == 3 && !ctx.hasInput(3)) continue;
    requireDtype(ctx, i, names[i], DataType::kInt64);
    if (i != 2) requireRank(ctx, i, names[i], 1, "1-D");
  }
  const int64_t lo = attrInt(ctx.node(), "min_ngram_size", 1);
  const int64_t hi = attrInt(ctx.node(), "max_ngram_size", 3);
  if (lo < 1 || hi < lo)
    ctx.fail("min_ngram_size " + std::to_string(lo) + " and max_ngram_size " + std::to_string(hi) +
             " must satisfy 1 <= min <= max");
  ctx.setOutput(0, DataType::kInt64, SymShape{Dim::unknown()});
  if (ctx.numOutputs() > 1) {
    if (const SymShape* p = ctx.inputShape(2)) {
      ctx.setOutput(1, DataType::kInt64, *p);
    } else {
      ctx.setOutputType(1, DataType::kInt64);
    }
  }
}

void inferDynamicTimeWarping(InferContext& ctx) {
  requireDtype(ctx, 0, "input", DataType::kFloat32);
  if (const SymShape* s = ctx.inputShape(0)) {
    if (!(s->size() == 2 || (s->size() == 3 && ((*s)[0] == Dim::known(1) || !(*s)[0].isKnown()))))
      ctx.fail("input must be [M, N] or [1, M, N], got " + symShapeToString(*s));
  }
  ctx.setOutput(0, DataType::kInt32, SymShape{Dim::known(2), Dim::unknown()});
}

void inferWordConvEmbedding(InferContext& ctx) {
  requireDtype(ctx, 0, "Sequence", DataType::kInt32);
  for (size_t i = 1; i < 4; ++i)
    requireDtype(ctx, i, i == 1 ? "W" : i == 2 ? "B" : "C", DataType::kFloat32);
  // onnxruntime reads dims 0 and 1 of a Sequence of any rank >= 2; kiln takes rank 2 only.
  requireRank(ctx, 0, "Sequence", 2, "[words, chars]");
  requireRank(ctx, 1, "W", 4, "[filters, 1, window, char_embedding]");
  requireRank(ctx, 2, "B", 1, "[filters]");
  requireRank(ctx, 3, "C", 2, "[chars, char_embedding]");
  const SymShape* seq = ctx.inputShape(0);
  const SymShape* w = ctx.inputShape(1);
  const SymShape* c = ctx.inputShape(3);
  // The attributes, when given, must agree with the weights (onnxruntime checks the same).
  auto agree = [&](const char* attr, const SymShape* s, size_t dim, const char* what) {
    if (!hasAttr(ctx.node(), attr) || !s || !(*s)[dim].isKnown()) return;
    const int64_t v = attrInt(ctx.node(), attr);
    if (v != (*s)[dim].value)
      ctx.fail(std::string("attribute '") + attr + "' = " + std::to_string(v) + " differs from " +
               what + " " + std::to_string((*s)[dim].value));
  };
  agree("embedding_size", w, 0, "W's filter count");
  agree("conv_window_size", w, 2, "W's window");
  agree("char_embedding_size", c, 1, "C's embedding size");
  ctx.setOutput(0, DataType::kFloat32,
                SymShape{seq ? (*seq)[0] : Dim::unknown(), w ? (*w)[0] : Dim::unknown()});
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "NGramRepeatBlock", 1, 1000, inferNGramRepeatBlock});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "BifurcationDetector", 1, 1000,
                         inferBifurcationDetector});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "DynamicTimeWarping", 1, 1000, inferDynamicTimeWarping});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "WordConvEmbedding", 1, 1000, inferWordConvEmbedding});

}  // namespace kiln::ir
