// Shape and type rules of two com.microsoft gate ops of recent LLM architectures (onnxruntime
// 1.32's CPU kernels; kernels in backends/cpu/kernels/contrib_llm_gates.cpp):
//   LinearAttentionGate(a, dt_bias, decay_scale, [b]) -> decay, [beta]
//     decay = decay_scale * softplus(a + dt_bias), beta = sigmoid(b); a and b (..., H) of a float
//     type T, dt_bias and decay_scale H float32 values
//   MoEGroupRouter(logits, expert_bias, [projection_weight])
//     -> [router_probs], [selection_scores], [router_weights]
//     group-limited sigmoid routing of (..., E) logits: router_probs (rows, E) of T holds
//     log(sigmoid) at the top_k experts of the best topk_group groups and router_sentinel
//     elsewhere; or the full float32 scores sigmoid + expert_bias and sigmoid (one group only,
//     E <= 512), then optionally of logits (rows, width) projected by projection_weight (E, width)
#include <climits>

#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

bool isGateFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

void requireGateFloat(const InferContext& ctx, size_t i, const char* name) {
  if (ctx.hasInput(i) && !isGateFloat(ctx.inputType(i))) {
    ctx.fail(std::string(name) + " must be float32, float16 or bfloat16, got " +
                 dataTypeName(ctx.inputType(i)),
             ErrorCode::kUnsupportedNode);
  }
}

void requireType(const InferContext& ctx, size_t i, const char* name, DataType want) {
  if (ctx.hasInput(i) && ctx.inputType(i) != want) {
    ctx.fail(std::string(name) + " must be " + dataTypeName(want) + ", got " +
             dataTypeName(ctx.inputType(i)));
  }
}

bool wants(const InferContext& ctx, size_t i) {
  return i < ctx.node().outputs.size() && ctx.node().outputs[i] != kNoValue;
}

/// The element count of input i when every dim is known.
std::optional<int64_t> knownCount(const InferContext& ctx, size_t i, const char* name) {
  const std::optional<Shape> s = ctx.inputConcreteShape(i);
  if (!s) return std::nullopt;
  int64_t n = 1;
  for (int64_t d : *s) n = multiplyDims(ctx.node(), n, d, std::string(name) + "'s element count");
  return n;
}

void inferLinearAttentionGate(InferContext& ctx) {
  for (size_t i : {0, 1, 2}) ctx.requireInput(i);
  requireGateFloat(ctx, 0, "a");
  requireType(ctx, 1, "dt_bias", DataType::kFloat32);
  requireType(ctx, 2, "decay_scale", DataType::kFloat32);
  requireType(ctx, 3, "b", ctx.inputType(0));
  if (wants(ctx, 1) && !ctx.hasInput(3))
    ctx.fail("the beta output needs the b input", ErrorCode::kInvalidArgument);
  const DataType type = ctx.inputType(0);
  const SymShape* a = ctx.inputShape(0);
  if (!a) {
    for (size_t o = 0; o < ctx.numOutputs(); ++o) ctx.setOutputType(o, type);
    return;
  }
  if (a->empty()) ctx.fail("a must have rank 1 or more, got a scalar");
  const Dim heads = a->back();
  if (heads.isKnown() && heads.value == 0) ctx.fail("a's last dimension (heads) must be positive");
  const char* names[] = {"a", "dt_bias", "decay_scale"};
  for (size_t i : {1, 2}) {
    const std::optional<int64_t> n = knownCount(ctx, i, names[i]);
    if (n && heads.isKnown() && *n != heads.value) {
      ctx.fail(std::string(names[i]) + " must hold " + std::to_string(heads.value) +
               " values (one per head), got " + std::to_string(*n));
    }
  }
  if (const SymShape* b = ctx.hasInput(3) ? ctx.inputShape(3) : nullptr) {
    bool same = b->size() == a->size();
    for (size_t d = 0; same && d < b->size(); ++d)
      same = !((*b)[d].isKnown() && (*a)[d].isKnown() && (*b)[d].value != (*a)[d].value);
    if (!same)
      ctx.fail("b " + symShapeToString(*b) + " must have a's shape " + symShapeToString(*a));
  }
  for (size_t o = 0; o < ctx.numOutputs(); ++o) ctx.setOutput(o, type, *a);
}

struct RouterAttrs {
  int64_t topK, groups, topkGroup, groupTopk;
};

RouterAttrs routerAttrs(const InferContext& ctx) {
  if (!hasAttr(ctx.node(), "top_k")) ctx.fail("the top_k attribute is required");
  const RouterAttrs a{attrInt(ctx.node(), "top_k"), attrInt(ctx.node(), "n_group", 1),
                      attrInt(ctx.node(), "topk_group", 1), attrInt(ctx.node(), "group_topk", 2)};
  const std::pair<const char*, int64_t> checks[] = {{"top_k", a.topK},
                                                    {"n_group", a.groups},
                                                    {"topk_group", a.topkGroup},
                                                    {"group_topk", a.groupTopk}};
  for (const auto& [name, v] : checks)
    if (v <= 0) ctx.fail(std::string(name) + " must be positive, got " + std::to_string(v));
  if (a.topkGroup > a.groups) {
    ctx.fail("topk_group " + std::to_string(a.topkGroup) + " must not exceed n_group " +
             std::to_string(a.groups));
  }
  return a;
}

void inferMoEGroupRouter(InferContext& ctx) {
  for (size_t i : {0, 1}) ctx.requireInput(i);
  const RouterAttrs attrs = routerAttrs(ctx);
  requireGateFloat(ctx, 0, "logits");
  requireType(ctx, 1, "expert_bias", DataType::kFloat32);
  requireType(ctx, 2, "projection_weight", ctx.inputType(0));
  const bool full = wants(ctx, 1) || wants(ctx, 2);
  if (full && !(wants(ctx, 1) && wants(ctx, 2)))
    ctx.fail("selection_scores and router_weights must be requested together");
  if (full && wants(ctx, 0))
    ctx.fail("the full-score outputs cannot be combined with router_probs");
  if (full && (attrs.groups != 1 || attrs.topkGroup != 1))
    ctx.fail("the full-score outputs need n_group = topk_group = 1");
  const bool projected = ctx.hasInput(2);
  if (projected && !full)
    ctx.fail("projection_weight needs the full-score outputs (selection_scores, router_weights)");
  const DataType type = ctx.inputType(0);
  const SymShape* x = ctx.inputShape(0);
  const SymShape* w = projected ? ctx.inputShape(2) : nullptr;
  if (x && x->size() < 2) ctx.fail("logits must have rank 2 or more, got " + symShapeToString(*x));
  Dim experts = x ? x->back() : Dim::unknown();
  Dim rows = x ? Dim::known(1) : Dim::unknown();
  if (x) {
    for (size_t d = 0; d + 1 < x->size(); ++d)
      rows = (*x)[d].isKnown() ? productDims(ctx.node(), rows, (*x)[d].value, "logits' rows")
                               : Dim::unknown();
  }
  if (projected) {
    if (x && x->size() != 2)
      ctx.fail("projected logits must be (rows, width), got " + symShapeToString(*x));
    if (w && w->size() != 2)
      ctx.fail("projection_weight must be (experts, width), got " + symShapeToString(*w));
    const Dim width = x ? x->back() : Dim::unknown();
    if (width.isKnown() && (width.value == 0 || width.value % 256 != 0 || width.value > INT_MAX)) {
      ctx.fail("projected logits' width must be a positive multiple of 256 up to INT_MAX, got " +
               std::to_string(width.value));
    }
    if (w && width.isKnown() && (*w)[1].isKnown() && (*w)[1].value != width.value) {
      ctx.fail("projection_weight's width " + std::to_string((*w)[1].value) +
               " must match the logits' " + std::to_string(width.value));
    }
    experts = w ? (*w)[0] : Dim::unknown();
  }
  if (experts.isKnown()) {
    const int64_t e = experts.value;
    if (e == 0) ctx.fail("the number of experts must be positive");
    if (e % attrs.groups != 0) {
      ctx.fail("the " + std::to_string(e) + " experts must split evenly into n_group " +
               std::to_string(attrs.groups) + " groups");
    }
    if (attrs.topK > e) {
      ctx.fail("top_k " + std::to_string(attrs.topK) + " must not exceed the " + std::to_string(e) +
               " experts");
    }
    if (const std::optional<int64_t> n = knownCount(ctx, 1, "expert_bias"); n && *n != e)
      ctx.fail("expert_bias must hold " + std::to_string(e) + " values, got " + std::to_string(*n));
    if (full && e > 512)
      ctx.fail("the full-score outputs need 512 experts or fewer, got " + std::to_string(e));
  }
  if (full && rows.isKnown() && rows.value > INT_MAX)
    ctx.fail("the full-score outputs need INT_MAX rows or fewer, got " +
             std::to_string(rows.value));
  const SymShape out = {rows, experts};
  const DataType types[] = {type, DataType::kFloat32, DataType::kFloat32};
  for (size_t o = 0; o < ctx.numOutputs() && o < 3; ++o) ctx.setOutput(o, types[o], out);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "LinearAttentionGate", 1, 1000,
                         inferLinearAttentionGate});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "MoEGroupRouter", 1, 1000, inferMoEGroupRouter});

}  // namespace kiln::ir
