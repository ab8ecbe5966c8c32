// Shape and type rules of the elementwise and normalization operators that ONNX Runtime's
// transformer optimizer writes (com.microsoft version 1, float32; ContribOperators.md):
//   Gelu(X)                      x/2 (1 + erf(x/sqrt2))
//   QuickGelu(X)                 x sigmoid(alpha x), alpha default 1.702
//   FastGelu(X, [bias])          the tanh approximation of Gelu of x + bias
//   BiasGelu(A, B)               Gelu of A + B
//   BiasAdd(X, bias, skip)       X + bias + skip, X and skip [N, S, C]
//   SkipLayerNormalization(input, skip, gamma, [beta], [bias])
//     -> output, [mean], [inv_std_var], [input_skip_bias_sum]: LayerNormalization over the last
//     dimension of s = input + skip + bias (skip broadcast over the batch), s itself as output 3
//   SkipSimplifiedLayerNormalization(input, skip, gamma, [bias]): the same with RMS statistics
//   SimplifiedLayerNormalization(X, scale) -> Y, [inv_std_var]: RMS normalization over the
//     dimensions from `axis` (ONNX Runtime registers it in the ONNX domain, opset 1)
//   EmbedLayerNormalization(input_ids [B, S] int32, [segment_ids], word_embedding [V, H],
//     position_embedding [P, H], [segment_embedding], gamma, beta, [mask [B, S] int32],
//     [position_ids]) -> output [B, S, H], [mask_index [B] int32], [embedding_sum [B, S, H]]:
//     LayerNormalization of the sum of the three embeddings
// A bias, beta or gamma is 1-D with one value per element of the last dimension.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void requireFloat32(const InferContext& ctx, size_t i) {
  if (ctx.hasInput(i) && ctx.inputType(i) != DataType::kFloat32) {
    ctx.fail("input " + std::to_string(i) +
                 " must be float32 (kiln implements this contrib op for float32), got " +
                 dataTypeName(ctx.inputType(i)),
             ErrorCode::kUnsupportedNode);
  }
}

// Input i, when present, is 1-D with as many values as the last dimension of input 0.
void requireRowVector(const InferContext& ctx, size_t i, const char* name) {
  if (!ctx.hasInput(i)) return;
  requireFloat32(ctx, i);
  const SymShape* x = ctx.inputShape(0);
  const SymShape* v = ctx.inputShape(i);
  if (!v) return;
  const bool lastMatches =
      x && !x->empty() && x->back().isKnown() && v->size() == 1 && (*v)[0].isKnown()
          ? x->back().value == (*v)[0].value
          : v->size() == 1;
  if (!lastMatches) {
    ctx.fail(std::string(name) +
             " must be 1-D with one value per element of the last dimension of " +
             (x ? symShapeToString(*x) : std::string("input 0")) + ", got " + symShapeToString(*v));
  }
}

void inferFloatUnary(InferContext& ctx) {
  ctx.requireInput(0);
  requireFloat32(ctx, 0);
  inferSameAsInput0(ctx);
}

void inferBiasActivation(InferContext& ctx) {
  inferFloatUnary(ctx);
  requireRowVector(ctx, 1, "the bias");
}

void inferBiasGelu(InferContext& ctx) {
  ctx.requireInput(1);
  inferBiasActivation(ctx);
}

void requireSameShape(const InferContext& ctx, size_t i, const char* name) {
  const SymShape* x = ctx.inputShape(0);
  const SymShape* s = ctx.inputShape(i);
  if (x && s && s->size() == x->size()) {
    for (size_t d = 0; d < s->size(); ++d) {
      if ((*s)[d].isKnown() && (*x)[d].isKnown() && (*s)[d].value != (*x)[d].value) {
        ctx.fail(std::string(name) + " " + symShapeToString(*s) + " must have the input's shape " +
                 symShapeToString(*x));
      }
    }
  } else if (x && s) {
    ctx.fail(std::string(name) + " " + symShapeToString(*s) + " must have the input's shape " +
             symShapeToString(*x));
  }
}

void inferBiasAdd(InferContext& ctx) {
  for (size_t i = 0; i < 3; ++i) ctx.requireInput(i);
  inferFloatUnary(ctx);
  const SymShape* x = ctx.inputShape(0);
  if (x && x->size() != 3) ctx.fail("X must have rank 3 ([N, S, C]), got " + symShapeToString(*x));
  requireRowVector(ctx, 1, "bias");
  requireFloat32(ctx, 2);
  requireSameShape(ctx, 2, "skip");
}

// The statistics' shape: the input's with the normalized dimensions (from `axis`) set to 1.
void setStatsOutput(InferContext& ctx, size_t output, int64_t axis) {
  const SymShape* x = ctx.inputShape(0);
  if (!x) return ctx.setOutputType(output, DataType::kFloat32);
  SymShape stats(x->begin(),
                 x->begin() + normalizeAxis(ctx, axis, static_cast<int64_t>(x->size())));
  stats.resize(x->size(), Dim::known(1));
  ctx.setOutput(output, DataType::kFloat32, stats);
}

// input, skip, gamma, then [beta], [bias] (SkipLayerNormalization) or [bias] (the simplified one).
void inferSkipLayerNorm(InferContext& ctx, bool simplified) {
  for (size_t i = 0; i < 3; ++i) ctx.requireInput(i);
  inferFloatUnary(ctx);
  const SymShape* x = ctx.inputShape(0);
  if (x && x->size() != 2 && x->size() != 3)
    ctx.fail("input must have rank 2 or 3, got " + symShapeToString(*x));
  requireFloat32(ctx, 1);
  const SymShape* skip = ctx.inputShape(1);
  if (x && skip) {
    const bool broadcast = skip->size() < x->size() ||
                           (skip->size() == 3 && (*skip)[0].isKnown() && (*skip)[0].value == 1);
    if (!broadcast) requireSameShape(ctx, 1, "skip");
    if (skip->size() < 2 || skip->size() > x->size()) {
      ctx.fail("skip " + symShapeToString(*skip) + " must have the input's shape " +
               symShapeToString(*x) + " or its last two dimensions");
    }
  }
  requireRowVector(ctx, 2, "gamma");
  requireRowVector(ctx, 3, simplified ? "bias" : "beta");
  if (!simplified) requireRowVector(ctx, 4, "bias");
  setStatsOutput(ctx, 1, -1);
  setStatsOutput(ctx, 2, -1);
  if (x) {
    ctx.setOutput(3, DataType::kFloat32, *x);
  } else {
    ctx.setOutputType(3, DataType::kFloat32);
  }
}

void inferSimplifiedLayerNorm(InferContext& ctx) {
  ctx.requireInput(0);
  ctx.requireInput(1);
  inferFloatUnary(ctx);
  requireFloat32(ctx, 1);
  if (attrInt(ctx.node(), "stash_type", 1) != 1) {
    ctx.fail("attribute 'stash_type' must be 1 (float32), got " +
                 std::to_string(attrInt(ctx.node(), "stash_type", 1)),
             ErrorCode::kUnsupportedNode);
  }
  setStatsOutput(ctx, 1, attrInt(ctx.node(), "axis", -1));
}

void requireInt32(const InferContext& ctx, size_t i, const char* name) {
  if (ctx.hasInput(i) && ctx.inputType(i) != DataType::kInt32) {
    ctx.fail(std::string(name) + " must be int32, got " + dataTypeName(ctx.inputType(i)));
  }
}

void inferEmbedLayerNorm(InferContext& ctx) {
  for (size_t i : {0, 2, 3, 5, 6}) ctx.requireInput(i);
  requireInt32(ctx, 0, "input_ids");
  requireInt32(ctx, 1, "segment_ids");
  requireInt32(ctx, 7, "mask");
  requireInt32(ctx, 8, "position_ids");
  if (ctx.hasInput(1) != ctx.hasInput(4))
    ctx.fail("segment_ids and segment_embedding must be given together");
  for (size_t i : {2, 3, 4, 5, 6}) requireFloat32(ctx, i);
  const SymShape* ids = ctx.inputShape(0);
  const SymShape* words = ctx.inputShape(2);
  if (ids && ids->size() != 2)
    ctx.fail("input_ids must be 2-D [batch, sequence], got " + symShapeToString(*ids));
  if (words && words->size() != 2)
    ctx.fail("word_embedding must be 2-D [vocabulary, hidden], got " + symShapeToString(*words));
  const Dim hidden = words ? (*words)[1] : Dim::unknown();
  const Dim batch = ids ? (*ids)[0] : Dim::unknown();
  const SymShape out = ids ? SymShape{(*ids)[0], (*ids)[1], hidden} : SymShape{};
  if (ids) {
    ctx.setOutput(0, DataType::kFloat32, out);
    ctx.setOutput(2, DataType::kFloat32, out);
  } else {
    ctx.setOutputType(0, DataType::kFloat32);
    ctx.setOutputType(2, DataType::kFloat32);
  }
  ctx.setOutput(1, DataType::kInt32, SymShape{batch});
}

// QEmbedLayerNormalization: EmbedLayerNormalization's inputs 0-7 with the embeddings, gamma and
// beta int8 or uint8 (inputs 2-6), then their float32 scales (8-12) and zero points (13-17), one
// per tensor; outputs layernorm_out and mask_index (no embedding_sum, no position_ids).
void inferQEmbedLayerNorm(InferContext& ctx) {
  for (size_t i : {0, 2, 3, 5, 6, 8, 9, 11, 12, 13, 14, 16, 17}) ctx.requireInput(i);
  requireInt32(ctx, 0, "input_ids");
  requireInt32(ctx, 1, "segment_ids");
  requireInt32(ctx, 7, "mask");
  if (ctx.hasInput(1) != ctx.hasInput(4) || ctx.hasInput(4) != ctx.hasInput(10) ||
      ctx.hasInput(10) != ctx.hasInput(15)) {
    ctx.fail("segment_ids, segment_embedding and its scale and zero point must be given together");
  }
  const DataType q = ctx.inputType(2);
  if (q != DataType::kInt8 && q != DataType::kUint8)
    ctx.fail("word_embedding_quant must be int8 or uint8, got " + dataTypeName(q));
  for (size_t i : {3, 4, 5, 6, 13, 14, 15, 16, 17}) {
    if (ctx.hasInput(i) && ctx.inputType(i) != q) {
      ctx.fail("input " + std::to_string(i) + " must have word_embedding_quant's type " +
               dataTypeName(q) + ", got " + dataTypeName(ctx.inputType(i)));
    }
  }
  for (size_t i = 8; i <= 12; ++i) requireFloat32(ctx, i);
  const SymShape* ids = ctx.inputShape(0);
  const SymShape* words = ctx.inputShape(2);
  if (ids && ids->size() != 2)
    ctx.fail("input_ids must be 2-D [batch, sequence], got " + symShapeToString(*ids));
  if (words && words->size() != 2)
    ctx.fail("word_embedding_quant must be 2-D [vocabulary, hidden], got " +
             symShapeToString(*words));
  const Dim hidden = words ? (*words)[1] : Dim::unknown();
  if (ids) {
    ctx.setOutput(0, DataType::kFloat32, SymShape{(*ids)[0], (*ids)[1], hidden});
    ctx.setOutput(1, DataType::kInt32, SymShape{(*ids)[0]});
  } else {
    ctx.setOutputType(0, DataType::kFloat32);
    ctx.setOutputType(1, DataType::kInt32);
  }
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "EmbedLayerNormalization", 1, 1000, inferEmbedLayerNorm});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QEmbedLayerNormalization", 1, 1000,
                         inferQEmbedLayerNorm});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "Gelu", 1, 1000, inferFloatUnary});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QuickGelu", 1, 1000, inferFloatUnary});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "FastGelu", 1, 1000, inferBiasActivation});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "BiasGelu", 1, 1000, inferBiasGelu});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "BiasAdd", 1, 1000, inferBiasAdd});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "SkipLayerNormalization", 1, 1000,
                         [](InferContext& ctx) { inferSkipLayerNorm(ctx, false); }});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "SkipSimplifiedLayerNormalization", 1, 1000,
                         [](InferContext& ctx) { inferSkipLayerNorm(ctx, true); }});
KILN_REGISTER_OP_SCHEMA({"", "SimplifiedLayerNormalization", 1, 1000, inferSimplifiedLayerNorm});

}  // namespace kiln::ir
