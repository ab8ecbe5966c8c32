// Shape and type rules of the small com.microsoft ops of recent LLM architectures (onnxruntime
// 1.32, ContribOperators.md; kernels in backends/cpu/kernels/contrib_llm_norms.cpp):
//   ScaledSiLU(X, [scale])          z = scale * x, y = z * sigmoid(z), each rounded to X's type;
//                                   scale a scalar that overrides the alpha attribute (default 1)
//   GatedAdd(X, Y, gate)            X + Y * gate, gate (..., 1) with X's leading dimensions;
//                                   the projected mode (gate_weight) is onnxruntime's CUDA only
//   GatedRMSNorm(X, scale, gate)    RMS normalization of each group of C = len(scale) values of
//                                   X's last dimension, times scale and act(gate), act silu,
//                                   swish or sigmoid
//   BranchwiseRMSNorm(X, [scale])   RMS normalization of each branch: X (..., C, H), or
//                                   (..., C * H) with num_branches = C; scale (H), (C, H) or (C*H)
//   EngramGate(key, query, value, key_norm_scale, query_norm_scale, [conv_norm_scale])
//     -> output, [gated_value_normed]: key and query (B, S, hc, H), value (B, S, H), scales
//     (hc, H); gate = sigmoid(sign(d) sqrt(max(|d|, 1e-6))) with d = RMSNorm(key) . RMSNorm(query)
//     / sqrt(H); output gate * value, and its RMSNorm with conv_norm_scale
//   UnfoldTensor(input)             every window of `size` elements `step` apart along `dim`: that
//                                   dim becomes (n - size) / step + 1 and `size` is appended
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

bool isLlmFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

// Input i (when present) is float32, float16 or bfloat16; float32 or float16 when !bf16.
void requireLlmFloat(const InferContext& ctx, size_t i, const char* name, bool bf16 = true) {
  if (!ctx.hasInput(i)) return;
  const DataType t = ctx.inputType(i);
  if (!isLlmFloat(t) || (!bf16 && t == DataType::kBFloat16)) {
    ctx.fail(std::string(name) + " must be float32, float16" + (bf16 ? " or bfloat16" : "") +
                 ", got " + dataTypeName(t),
             ErrorCode::kUnsupportedNode);
  }
}

void requireSameType(const InferContext& ctx, size_t i, const char* name) {
  if (ctx.hasInput(i) && ctx.inputType(i) != ctx.inputType(0)) {
    ctx.fail(std::string(name) + " must have X's type " + dataTypeName(ctx.inputType(0)) +
             ", got " + dataTypeName(ctx.inputType(i)));
  }
}

bool knownAndDiffer(const Dim& a, const Dim& b) {
  return a.isKnown() && b.isKnown() && a.value != b.value;
}

// Input i (when its shape is known) is `want` where both dims are known.
void requireShape(const InferContext& ctx, size_t i, const char* name, const SymShape& want,
                  const std::string& wantText) {
  const SymShape* s = ctx.inputShape(i);
  if (!s) return;
  bool same = s->size() == want.size();
  for (size_t d = 0; same && d < s->size(); ++d) same = !knownAndDiffer((*s)[d], want[d]);
  if (!same) ctx.fail(std::string(name) + " " + symShapeToString(*s) + " must " + wantText);
}

// Input i has input 0's shape (where both are known).
void requireShapeOfX(const InferContext& ctx, size_t i, const char* name) {
  if (const SymShape* x = ctx.inputShape(0))
    requireShape(ctx, i, name, *x, "have X's shape " + symShapeToString(*x));
}

void inferScaledSiLU(InferContext& ctx) {
  ctx.requireInput(0);
  requireLlmFloat(ctx, 0, "X");
  requireLlmFloat(ctx, 1, "scale");
  const SymShape* s = ctx.hasInput(1) ? ctx.inputShape(1) : nullptr;
  if (s && !s->empty()) ctx.fail("scale must be a scalar, got " + symShapeToString(*s));
  inferSameAsInput0(ctx);
}

void inferGatedAdd(InferContext& ctx) {
  for (size_t i : {0, 1, 2}) ctx.requireInput(i);
  if (ctx.hasInput(3)) {
    ctx.fail(
        "gate_weight (the projected mode) is not implemented (onnxruntime runs it on CUDA only)",
        ErrorCode::kUnsupportedNode);
  }
  requireLlmFloat(ctx, 0, "X", false);
  requireSameType(ctx, 1, "Y");
  requireSameType(ctx, 2, "gate");
  requireShapeOfX(ctx, 1, "Y");
  const SymShape* x = ctx.inputShape(0);
  const SymShape* g = ctx.inputShape(2);
  if (x && x->empty()) ctx.fail("X must have rank 1 or more, got a scalar");
  if (x && g) {
    bool fits = g->size() == x->size() && !knownAndDiffer(g->back(), Dim::known(1));
    for (size_t d = 0; fits && d + 1 < g->size(); ++d) fits = !knownAndDiffer((*g)[d], (*x)[d]);
    if (!fits) {
      ctx.fail("gate " + symShapeToString(*g) + " must be X's shape " + symShapeToString(*x) +
               " with a last dimension of 1");
    }
  }
  inferSameAsInput0(ctx);
}

void inferGatedRMSNorm(InferContext& ctx) {
  for (size_t i : {0, 1, 2}) ctx.requireInput(i);
  requireLlmFloat(ctx, 0, "X");
  requireSameType(ctx, 1, "scale");
  requireSameType(ctx, 2, "gate");
  const std::string activation = attrString(ctx.node(), "activation", "silu");
  if (activation != "silu" && activation != "swish" && activation != "sigmoid")
    ctx.fail("activation must be silu, swish or sigmoid, got '" + activation + "'");
  const SymShape* x = ctx.inputShape(0);
  const SymShape* s = ctx.inputShape(1);
  if (x && x->empty()) ctx.fail("X must have rank 1 or more, got a scalar");
  if (s && s->size() != 1) ctx.fail("scale must be 1-D (C), got " + symShapeToString(*s));
  if (x && s && (*s)[0].isKnown() && x->back().isKnown() &&
      ((*s)[0].value == 0 || x->back().value % (*s)[0].value != 0)) {
    ctx.fail("X's last dimension " + x->back().toString() + " must be a multiple of scale's " +
             (*s)[0].toString());
  }
  requireShapeOfX(ctx, 2, "gate");
  inferSameAsInput0(ctx);
}

void inferBranchwiseRMSNorm(InferContext& ctx) {
  ctx.requireInput(0);
  requireLlmFloat(ctx, 0, "X");
  requireLlmFloat(ctx, 1, "scale");
  const int64_t branches = attrInt(ctx.node(), "num_branches", 0);
  if (branches < 0) ctx.fail("num_branches must be 0 or positive, got " + std::to_string(branches));
  const SymShape* x = ctx.inputShape(0);
  if (x && x->size() < (branches ? 1u : 2u)) {
    ctx.fail(std::string(branches ? "flattened X (num_branches set) must have rank 1 or more"
                                  : "grouped X (..., C, H) must have rank 2 or more") +
             ", got " + symShapeToString(*x));
  }
  const SymShape* s = ctx.hasInput(1) ? ctx.inputShape(1) : nullptr;
  if (x && branches && x->back().isKnown() &&
      (x->back().value == 0 || x->back().value % branches != 0)) {
    ctx.fail("X's last dimension " + x->back().toString() + " must be a positive multiple of " +
             "num_branches " + std::to_string(branches));
  }
  if (x && s) {
    Dim c = branches ? Dim::known(branches) : (*x)[x->size() - 2];
    Dim h = branches ? (x->back().isKnown() ? Dim::known(x->back().value / branches) : Dim{})
                     : x->back();
    bool fits = false;
    if (s->size() == 1) {
      const Dim& n = (*s)[0];
      fits = !n.isKnown() || !h.isKnown() || n.value == h.value ||
             (c.isKnown() && n.value == c.value * h.value);
    } else if (s->size() == 2) {
      fits = !knownAndDiffer((*s)[0], c) && !knownAndDiffer((*s)[1], h);
    }
    if (!fits) {
      ctx.fail("scale " + symShapeToString(*s) + " must be (H), (C, H) or (C * H) with C = " +
               c.toString() + ", H = " + h.toString());
    }
  }
  inferSameAsInput0(ctx);
}

void inferEngramGate(InferContext& ctx) {
  for (size_t i : {0, 1, 2, 3, 4}) ctx.requireInput(i);
  requireLlmFloat(ctx, 0, "key", false);
  const char* names[] = {
      "key", "query", "value", "key_norm_scale", "query_norm_scale", "conv_norm_scale"};
  for (size_t i = 1; i < 6; ++i) requireSameType(ctx, i, names[i]);
  if (ctx.node().outputs.size() > 1 && ctx.node().outputs[1] != kNoValue && !ctx.hasInput(5))
    ctx.fail("the gated_value_normed output needs the conv_norm_scale input");
  const SymShape* key = ctx.inputShape(0);
  if (key && key->size() != 4)
    ctx.fail("key must be (batch, sequence, hc_mult, hidden), got " + symShapeToString(*key));
  requireShapeOfX(ctx, 1, "query");
  if (key) {
    const SymShape value = {(*key)[0], (*key)[1], (*key)[3]};
    const SymShape scale = {(*key)[2], (*key)[3]};
    requireShape(ctx, 2, "value", value, "be " + symShapeToString(value));
    for (size_t i : {3, 4, 5})
      if (ctx.hasInput(i)) requireShape(ctx, i, names[i], scale, "be " + symShapeToString(scale));
  }
  inferSameAsInput0(ctx);
  if (ctx.numOutputs() > 1) {
    if (key)
      ctx.setOutput(1, ctx.inputType(0), *key);
    else
      ctx.setOutputType(1, ctx.inputType(0));
  }
}

void inferUnfoldTensor(InferContext& ctx) {
  ctx.requireInput(0);
  if (!hasAttr(ctx.node(), "size")) ctx.fail("the size attribute is required");
  const int64_t size = attrInt(ctx.node(), "size");
  const int64_t step = attrInt(ctx.node(), "step", 1);
  if (size <= 0 || step <= 0) {
    ctx.fail("size and step must be positive, got size " + std::to_string(size) + ", step " +
             std::to_string(step));
  }
  const DataType type = ctx.inputType(0);
  const SymShape* in = ctx.inputShape(0);
  if (!in) return ctx.setOutputType(0, type);
  if (in->empty()) ctx.fail("input must have rank 1 or more, got a scalar");
  const int64_t rank = static_cast<int64_t>(in->size());
  const size_t dim = static_cast<size_t>(normalizeAxis(ctx, attrInt(ctx.node(), "dim", -1), rank));
  SymShape out = *in;
  const Dim& n = (*in)[dim];
  if (n.isKnown()) {
    if (n.value < size) {
      ctx.fail("input dimension " + std::to_string(dim) + " (" + std::to_string(n.value) +
               ") is shorter than the window size " + std::to_string(size));
    }
    out[dim] = Dim::known((n.value - size) / step + 1);
  } else {
    out[dim] = Dim::unknown();
  }
  out.push_back(Dim::known(size));
  ctx.setOutput(0, type, out);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "ScaledSiLU", 1, 1000, inferScaledSiLU});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "GatedAdd", 1, 1000, inferGatedAdd});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "GatedRMSNorm", 1, 1000, inferGatedRMSNorm});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "BranchwiseRMSNorm", 1, 1000, inferBranchwiseRMSNorm});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "EngramGate", 1, 1000, inferEngramGate});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "UnfoldTensor", 1, 1000, inferUnfoldTensor});

}  // namespace kiln::ir
