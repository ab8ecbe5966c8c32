// CPU kernel of LinearAttention: a recurrent state S (dk x dv) per batch and key/value head.
// Each step is the shared recurrence (linear_attention_recurrence.h), read as scale * S^T q for
// every query head of the group.
#include <cmath>

#include "backends/cpu/kernels/linear_attention_recurrence.h"
#include "backends/cpu/kernels/node_label.h"
#include "ir/shape_helpers.h"

namespace kiln::cpu {
namespace {

struct LinearAttentionAttrs {
  ir::Node label;
  std::string rule;
  int64_t qHeads = 0, kvHeads = 0;
  double scale = 0;
};

LinearAttentionAttrs linearAttentionAttrs(const ir::Node& node) {
  return {nodeLabel(node), ir::attrString(node, "update_rule", "gated_delta"),
          ir::attrInt(node, "q_num_heads"), ir::attrInt(node, "kv_num_heads"),
          ir::attrFloat(node, "scale", 0.0f)};
}

void linearAttentionKernel(KernelContext& ctx, const LinearAttentionAttrs& attrs) {
  const Tensor& query = ctx.input(0);
  const Tensor& key = ctx.input(1);
  const Tensor& value = ctx.input(2);
  const Tensor* past = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
  const Tensor* decay = ctx.hasInput(4) ? &ctx.input(4) : nullptr;
  const Tensor* beta = ctx.hasInput(5) ? &ctx.input(5) : nullptr;
  const std::string& rule = attrs.rule;
  const bool gated = rule == "gated" || rule == "gated_delta";
  const bool delta = rule == "delta" || rule == "gated_delta";
  if (gated != (decay != nullptr))
    ctx.fail("update_rule '" + rule + (gated ? "' needs" : "' forbids") + " the decay input",
             ErrorCode::kInvalidModel);
  if (delta != (beta != nullptr))
    ctx.fail("update_rule '" + rule + (delta ? "' needs" : "' forbids") + " the beta input",
             ErrorCode::kInvalidModel);
  const int64_t qHeads = attrs.qHeads, kvHeads = attrs.kvHeads;
  if (query.rank() != 3 || key.rank() != 3 || value.rank() != 3)
    ctx.fail("query, key and value must be (B, T, H * D)", ErrorCode::kInvalidArgument);
  const int64_t batches = query.dim(0), steps = query.dim(1);
  if (qHeads <= 0 || kvHeads <= 0 || qHeads % kvHeads != 0 || query.dim(2) % qHeads != 0 ||
      value.dim(2) % kvHeads != 0) {
    ctx.fail("head counts do not divide the hidden sizes", ErrorCode::kInvalidArgument);
  }
  const int64_t dk = query.dim(2) / qHeads, dv = value.dim(2) / kvHeads, group = qHeads / kvHeads;
  if (key.shape() != Shape{batches, steps, kvHeads * dk} || value.dim(0) != batches ||
      value.dim(1) != steps) {
    ctx.fail("key " + key.describe() + " or value " + value.describe() + " does not match query " +
                 query.describe(),
             ErrorCode::kInvalidArgument);
  }
  if (past && past->shape() != Shape{batches, kvHeads, dk, dv})
    ctx.fail("past_state " + past->describe() + " must be (B, Hkv, dk, dv)",
             ErrorCode::kInvalidArgument);
  // Rank and (B, T) first: the per-token reads below index decay and beta by both.
  auto tokenMajor = [&](const Tensor* t) {
    return t->rank() == 3 && t->dim(0) == batches && t->dim(1) == steps;
  };
  if (decay &&
      (!tokenMajor(decay) || (decay->dim(2) != kvHeads && decay->dim(2) != kvHeads * dk))) {
    ctx.fail("decay " + decay->describe() + " must be (B, T, kv_num_heads or kv_num_heads * dk)",
             ErrorCode::kInvalidArgument);
  }
  const bool decayPerFeature = decay && decay->dim(2) == kvHeads * dk;
  if (beta && (!tokenMajor(beta) || (beta->dim(2) != kvHeads && beta->dim(2) != 1))) {
    ctx.fail("beta " + beta->describe() + " must be (B, T, kv_num_heads or 1)",
             ErrorCode::kInvalidArgument);
  }
  const int64_t stateCount =
      multiplyDims(attrs.label, multiplyDims(attrs.label, batches, kvHeads, "state size"),
                   multiplyDims(attrs.label, dk, dv, "state size"), "state size");
  const int64_t outCount = multiplyDims(
      attrs.label,
      multiplyDims(attrs.label, multiplyDims(attrs.label, batches, steps, "output size"), qHeads,
                   "output size"),
      dv, "output size");
  checkBuffer(ctx, addDims(attrs.label, outCount, stateCount, "output size"), sizeof(float),
              "the float output and state");
  const double scaleAttr = attrs.scale;
  const float scale =
      scaleAttr == 0.0 ? 1.0f / std::sqrt(static_cast<float>(dk)) : static_cast<float>(scaleAttr);

  const char* op = "LinearAttention";
  const std::vector<float> q = floatValues(query, op), k = floatValues(key, op),
                           v = floatValues(value, op);
  const std::vector<float> g = decay ? floatValues(*decay, op) : std::vector<float>{};
  const std::vector<float> bt = beta ? floatValues(*beta, op) : std::vector<float>{};
  std::vector<float> state =
      past ? floatValues(*past, op) : std::vector<float>(static_cast<size_t>(stateCount), 0.0f);
  std::vector<float> out(static_cast<size_t>(outCount), 0.0f);
  std::vector<float> added(static_cast<size_t>(dv));
  const LinearAttentionRule stepRule{gated, delta};
  // No token or no value column: nothing to compute, and the head loop would be bounded by no
  // tensor's size (kv_num_heads is only an attribute then).
  const int64_t heads = steps == 0 || dv == 0 ? 0 : kvHeads;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      float* s = state.data() + (b * kvHeads + h) * dk * dv;
      for (int64_t t = 0; t < steps; ++t) {
        const int64_t row = b * steps + t;
        LinearAttentionToken token;
        token.k = k.data() + row * kvHeads * dk + h * dk;
        token.v = v.data() + row * kvHeads * dv + h * dv;
        if (gated) {
          token.decayPerKey = decayPerFeature;
          token.logDecay = g.data() + row * decay->dim(2) + (decayPerFeature ? h * dk : h);
        }
        if (delta) token.beta = bt[row * beta->dim(2) + (beta->dim(2) == 1 ? 0 : h)];
        linearAttentionStep(s, dk, dv, stepRule, token, added.data());
        for (int64_t qh = h * group; qh < (h + 1) * group; ++qh) {
          linearAttentionReadout(s, dk, dv, q.data() + row * qHeads * dk + qh * dk, scale,
                                 out.data() + row * qHeads * dv + qh * dv);
        }
      }
    }
  }
  storeFloats(out, ctx.allocateOutput(0, query.dtype(), {batches, steps, qHeads * dv}), op);
  if (ctx.wantsOutput(1))
    storeFloats(
        state,
        ctx.allocateOutput(1, past ? past->dtype() : query.dtype(), {batches, kvHeads, dk, dv}),
        op);
}

KILN_REGISTER_CPU_KERNEL("LinearAttention",
                         bindKernel(linearAttentionAttrs, linearAttentionKernel));

}  // namespace
}  // namespace kiln::cpu
