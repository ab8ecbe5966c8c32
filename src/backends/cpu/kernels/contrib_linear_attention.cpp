// CPU kernel of com.microsoft LinearAttention: onnxruntime's 3D packed layout over the shared
// recurrence (linear_attention_recurrence.h). One state per batch and key/value head; key head
// h * Hk / Hkv feeds value head h; each query head of a group reads its value head's state, or
// (inverse grouped-query attention, Hq < Hkv) each value head reads query head h * Hq / Hkv.
// decay and beta are checked whenever present and read only by the rules that use them, as
// onnxruntime does.
#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels/linear_attention_recurrence.h"
#include "backends/cpu/kernels/node_label.h"
#include "ir/shape_helpers.h"

namespace kiln::cpu {
namespace {

constexpr const char* kOp = "LinearAttention";

struct Attrs {
  ir::Node label;
  std::string ruleName;
  LinearAttentionRule rule;
  int64_t qHeads = 0, kvHeads = 0;
  float scale = 0;
};

Attrs readAttrs(const ir::Node& node) {
  Attrs a;
  a.label = nodeLabel(node);
  a.ruleName = ir::attrString(node, "update_rule", "gated_delta");
  a.rule = linearAttentionRule(a.ruleName).value_or(LinearAttentionRule{});
  a.qHeads = ir::attrInt(node, "q_num_heads");
  a.kvHeads = ir::attrInt(node, "kv_num_heads");
  a.scale = ir::attrFloat(node, "scale", 0.0f);
  return a;
}

/// The last dim of an optional (B, T, n) gate input, checked against the batch and steps and
/// the widths it may have ("decay", {Hkv, Hkv * dk}).
int64_t gateWidth(const KernelContext& ctx, const Tensor& gate, const char* name, int64_t batches,
                  int64_t steps, int64_t narrow, int64_t wide, const std::string& widths) {
  if (gate.rank() != 3 || gate.dim(0) != batches || gate.dim(1) != steps ||
      (gate.dim(2) != narrow && gate.dim(2) != wide)) {
    ctx.fail(std::string(name) + " " + gate.describe() + " must be (B, T, " + widths + ") with B " +
                 std::to_string(batches) + " and T " + std::to_string(steps),
             ErrorCode::kInvalidArgument);
  }
  return gate.dim(2);
}

void run(KernelContext& ctx, const Attrs& attrs) {
  const Tensor& query = ctx.input(0);
  if (!ctx.hasInput(1) || !ctx.hasInput(2))
    ctx.fail("key and value are required", ErrorCode::kInvalidArgument);
  const Tensor& key = ctx.input(1);
  const Tensor& value = ctx.input(2);
  const Tensor* past = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
  const Tensor* decay = ctx.hasInput(4) ? &ctx.input(4) : nullptr;
  const Tensor* beta = ctx.hasInput(5) ? &ctx.input(5) : nullptr;
  const LinearAttentionRule rule = attrs.rule;
  if (rule.gated && !decay)
    ctx.fail("update_rule '" + attrs.ruleName + "' needs the decay input",
             ErrorCode::kInvalidModel);
  if (rule.delta && !beta)
    ctx.fail("update_rule '" + attrs.ruleName + "' needs the beta input", ErrorCode::kInvalidModel);
  if (query.rank() != 3 || key.rank() != 3 || value.rank() != 3) {
    ctx.fail("query " + query.describe() + ", key " + key.describe() + " and value " +
                 value.describe() + " must be (B, T, H * D)",
             ErrorCode::kInvalidArgument);
  }
  const int64_t batches = query.dim(0), steps = query.dim(1);
  if (key.dim(0) != batches || value.dim(0) != batches || key.dim(1) != steps ||
      value.dim(1) != steps) {
    ctx.fail("key " + key.describe() + " or value " + value.describe() + " differs from query " +
                 query.describe() + " in B or T",
             ErrorCode::kInvalidArgument);
  }
  const int64_t qHeads = attrs.qHeads, kvHeads = attrs.kvHeads;
  const int64_t dk = query.dim(2) / qHeads, dv = value.dim(2) / kvHeads;
  if (dk == 0 || query.dim(2) % qHeads != 0)
    ctx.fail("query " + query.describe() + ": hidden size is not q_num_heads (" +
                 std::to_string(qHeads) + ") x a positive head size",
             ErrorCode::kInvalidArgument);
  if (value.dim(2) % kvHeads != 0)
    ctx.fail("value " + value.describe() + ": hidden size is not a multiple of kv_num_heads " +
                 std::to_string(kvHeads),
             ErrorCode::kInvalidArgument);
  const int64_t kHeads = key.dim(2) / dk;
  if (key.dim(2) % dk != 0 || kHeads == 0 || kvHeads % kHeads != 0) {
    ctx.fail("key " + key.describe() + ": hidden size must be a number of heads of size " +
                 std::to_string(dk) + " dividing kv_num_heads " + std::to_string(kvHeads),
             ErrorCode::kInvalidArgument);
  }
  const int64_t decayWidth = decay
                                 ? gateWidth(ctx, *decay, "decay", batches, steps, kvHeads,
                                             multiplyDims(attrs.label, kvHeads, dk, "decay width"),
                                             "kv_num_heads or kv_num_heads * dk")
                                 : 0;
  const int64_t betaWidth =
      beta ? gateWidth(ctx, *beta, "beta", batches, steps, kvHeads, 1, "kv_num_heads or 1") : 0;
  const Shape stateShape{batches, kvHeads, dk, dv};
  if (past && past->shape() != stateShape)
    ctx.fail("past_state " + past->describe() +
                 " must be (B, kv_num_heads, dk, dv) = " + shapeToString(stateShape),
             ErrorCode::kInvalidArgument);
  const int64_t outHeads = std::max(qHeads, kvHeads);
  const int64_t outHidden = multiplyDims(attrs.label, outHeads, dv, "output hidden size");
  const int64_t outCount =
      multiplyDims(attrs.label, multiplyDims(attrs.label, batches, steps, "output size"), outHidden,
                   "output size");
  const int64_t stateCount =
      multiplyDims(attrs.label, multiplyDims(attrs.label, batches, kvHeads, "state size"),
                   multiplyDims(attrs.label, dk, dv, "state size"), "state size");
  checkBuffer(ctx, addDims(attrs.label, outCount, stateCount, "output size"), sizeof(float),
              "the float output and state");
  const float scale = attrs.scale == 0.0f ? 1.0f / std::sqrt(static_cast<float>(dk)) : attrs.scale;

  const std::vector<float> q = floatValues(query, kOp), k = floatValues(key, kOp),
                           v = floatValues(value, kOp);
  const std::vector<float> g = rule.gated ? floatValues(*decay, kOp) : std::vector<float>{};
  const std::vector<float> bt = rule.delta ? floatValues(*beta, kOp) : std::vector<float>{};
  std::vector<float> state =
      past ? floatValues(*past, kOp) : std::vector<float>(static_cast<size_t>(stateCount), 0.0f);
  std::vector<float> out(static_cast<size_t>(outCount), 0.0f);
  std::vector<float> added(static_cast<size_t>(dv));
  const int64_t valuesPerKey = kvHeads / kHeads;
  // No token or no value column: nothing to compute, and the head loop would not be bounded by
  // any tensor's size (kv_num_heads is only an attribute then).
  const int64_t heads = steps == 0 || dv == 0 ? 0 : kvHeads;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      float* s = state.data() + (b * kvHeads + h) * dk * dv;
      for (int64_t t = 0; t < steps; ++t) {
        const int64_t row = b * steps + t;
        LinearAttentionToken token;
        token.k = k.data() + (row * kHeads + h / valuesPerKey) * dk;
        token.v = v.data() + (row * kvHeads + h) * dv;
        if (rule.gated) {
          token.decayPerKey = decayWidth != kvHeads;
          token.logDecay = g.data() + row * decayWidth + (token.decayPerKey ? h * dk : h);
        }
        if (rule.delta) token.beta = bt[row * betaWidth + (betaWidth == 1 ? 0 : h)];
        linearAttentionStep(s, dk, dv, rule, token, added.data());
        const float* qRow = q.data() + row * qHeads * dk;
        float* outRow = out.data() + row * outHidden;
        if (qHeads >= kvHeads) {
          const int64_t group = qHeads / kvHeads;
          for (int64_t qh = h * group; qh < (h + 1) * group; ++qh)
            linearAttentionReadout(s, dk, dv, qRow + qh * dk, scale, outRow + qh * dv);
        } else {
          linearAttentionReadout(s, dk, dv, qRow + h * qHeads / kvHeads * dk, scale,
                                 outRow + h * dv);
        }
      }
    }
  }
  storeFloats(out, ctx.allocateOutput(0, query.dtype(), {batches, steps, outHidden}), kOp);
  if (ctx.wantsOutput(1))
    storeFloats(state, ctx.allocateOutput(1, past ? past->dtype() : query.dtype(), stateShape),
                kOp);
}

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "LinearAttention", bindKernel(readAttrs, run));

}  // namespace
}  // namespace kiln::cpu
