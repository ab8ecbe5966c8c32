// CPU kernel of com.microsoft GatedDeltaNet: the shared recurrence (linear_attention_recurrence.h)
// over token-major heads. Value head h reads query / key head h / (Hv / Hq); requests are the
// cu_seqlens ranges of the tokens, or B equal ones. The state is V-major [B, Hv, dv, dk] outside
// and (dk x dv) inside. The fused gates run in float as onnxruntime's kernel does:
//   softplus (qwen): g = -exp(a_log) * softplus(decay + dt_bias)
//   sigmoid (kda):   g = gate_lower_bound * sigmoid(exp(a_log) * (decay + dt_bias))
// and the first capture_count transitions of each request are written as state_update's
// struct-of-arrays: C rows of exp(g), then C of keys, then C of the added deltas.
#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels/gate_math.h"
#include "backends/cpu/kernels/linear_attention_recurrence.h"
#include "backends/cpu/kernels/node_label.h"
#include "ir/shape_helpers.h"

namespace kiln::cpu {
namespace {

constexpr const char* kOp = "GatedDeltaNet";

enum class Gate { kNone, kSoftplus, kSigmoid };

struct Attrs {
  ir::Node label;
  std::string ruleName;
  LinearAttentionRule rule;
  Gate gate = Gate::kNone;
  bool betaSigmoid = false, l2Norm = false;
  float scale = 0, lowerBound = -5.0f;
  int64_t capacity = 0;
};

Attrs readAttrs(const ir::Node& node) {
  Attrs a;
  a.label = nodeLabel(node);
  a.ruleName = ir::attrString(node, "update_rule", "gated_delta");
  a.rule = linearAttentionRule(a.ruleName).value_or(LinearAttentionRule{});
  const std::string gate = ir::attrString(node, "gate_activation", "none");
  a.gate = gate == "softplus" || gate == "qwen" ? Gate::kSoftplus
           : gate == "sigmoid" || gate == "kda" ? Gate::kSigmoid
                                                : Gate::kNone;
  a.betaSigmoid = ir::attrString(node, "beta_activation", "none") == "sigmoid";
  a.l2Norm = ir::attrInt(node, "qk_l2_norm", 0) != 0;
  a.scale = ir::attrFloat(node, "scale", 0.0f);
  a.lowerBound = ir::attrFloat(node, "gate_lower_bound", -5.0f);
  a.capacity = ir::attrInt(node, "state_update_capacity", 0);
  return a;
}

/// Head counts and sizes, the token dims (one: [tokens], or two: [B, S]) and where each of
/// q, k and v starts in its token's row.
struct Layout {
  Shape tokenDims;
  int64_t tokens = 0, qkHeads = 0, vHeads = 0, dk = 0, dv = 0;
  int64_t qRow = 0, kRow = 0, vRow = 0, kOffset = 0, vOffset = 0;  // row widths, offsets
};

Shape leading(const Tensor& t, size_t drop) {
  const Shape& s = t.shape();
  return Shape(s.begin(), s.end() - static_cast<std::ptrdiff_t>(drop));
}

Layout layoutOf(const KernelContext& ctx, const Attrs& attrs, const Tensor& query,
                const Tensor* key, const Tensor* value, const Tensor* state) {
  Layout l;
  if (!key) {  // packed QKV: [q heads | k heads | v heads] per token
    if (query.rank() != 2 && query.rank() != 3)
      ctx.fail("packed QKV query " + query.describe() + " must be [tokens, W] or [B, S, W]",
               ErrorCode::kInvalidArgument);
    if (!state || state->rank() != 4)
      ctx.fail("packed QKV needs initial_state [B, Hv, dv, dk] for the head counts",
               ErrorCode::kInvalidArgument);
    l.vHeads = state->dim(1), l.dv = state->dim(2), l.dk = state->dim(3);
    const int64_t width = query.dim(query.rank() - 1);
    const int64_t vWidth = multiplyDims(attrs.label, l.vHeads, l.dv, "packed value width");
    const int64_t qkWidth = width - vWidth;
    if (l.dk <= 0 || l.vHeads <= 0 || qkWidth <= 0 ||
        qkWidth % multiplyDims(attrs.label, 2, l.dk, "packed head width") != 0) {
      ctx.fail("packed QKV query " + query.describe() + " is not 2 * Hq * dk + Hv * dv wide for" +
                   " initial_state " + state->describe(),
               ErrorCode::kInvalidArgument);
    }
    l.qkHeads = qkWidth / l.dk / 2;
    l.tokenDims = leading(query, 1);
    l.qRow = l.kRow = l.vRow = width;
    l.kOffset = qkWidth / 2, l.vOffset = qkWidth;
  } else {
    if ((query.rank() != 3 && query.rank() != 4) || key->rank() != query.rank() ||
        value->rank() != query.rank() || leading(*key, 2) != leading(query, 2) ||
        leading(*value, 2) != leading(query, 2) ||
        key->dim(key->rank() - 1) != query.dim(query.rank() - 1)) {
      ctx.fail("query " + query.describe() + ", key " + key->describe() + " and value " +
                   value->describe() + " must be [tokens, H, D] or [B, S, H, D] with one token" +
                   " layout and key head size the query's",
               ErrorCode::kInvalidArgument);
    }
    const size_t r = query.rank();
    l.qkHeads = query.dim(r - 2), l.dk = query.dim(r - 1);
    l.vHeads = value->dim(r - 2), l.dv = value->dim(r - 1);
    if (key->dim(r - 2) != l.qkHeads)
      ctx.fail("num_heads_q (" + std::to_string(l.qkHeads) + ") must equal num_heads_k (" +
                   std::to_string(key->dim(r - 2)) + ")",
               ErrorCode::kInvalidArgument);
    l.tokenDims = leading(query, 2);
    l.qRow = l.kRow = multiplyDims(attrs.label, l.qkHeads, l.dk, "query row");
    l.vRow = multiplyDims(attrs.label, l.vHeads, l.dv, "value row");
  }
  if (l.dk <= 0)  // the scale 1 / sqrt(dk) and the decay of each key dim need one
    ctx.fail("head_size_qk must be positive, got " + std::to_string(l.dk),
             ErrorCode::kInvalidArgument);
  if (l.qkHeads <= 0 || l.vHeads <= 0 || l.vHeads % l.qkHeads != 0) {
    ctx.fail("num_heads_v (" + std::to_string(l.vHeads) + ") must be a positive multiple of" +
                 " num_heads_q (" + std::to_string(l.qkHeads) + ")",
             ErrorCode::kInvalidArgument);
  }
  l.tokens = 1;
  for (int64_t d : l.tokenDims) l.tokens = multiplyDims(attrs.label, l.tokens, d, "token count");
  return l;
}

/// The first token of each request and one past the last: cu_seqlens, checked, or B equal ranges.
std::vector<int64_t> requestBounds(const KernelContext& ctx, const Layout& l,
                                   const Tensor* cuSeqlens, const Tensor* state) {
  std::vector<int64_t> bounds;
  if (cuSeqlens) {
    if (l.tokenDims.size() != 1)
      ctx.fail("cu_seqlens describes ragged packing, so the token axis must be one dim (query " +
                   std::string("rank 3, or rank 2 packed)"),
               ErrorCode::kInvalidArgument);
    if (cuSeqlens->rank() != 1 || cuSeqlens->dim(0) < 1)
      ctx.fail("cu_seqlens " + cuSeqlens->describe() + " must be [batch + 1]",
               ErrorCode::kInvalidArgument);
    const int32_t* cu = cuSeqlens->data<int32_t>();
    bounds.assign(cu, cu + cuSeqlens->dim(0));
    if (bounds.front() != 0 || bounds.back() != l.tokens)
      ctx.fail("cu_seqlens must start at 0 and end at total_tokens " + std::to_string(l.tokens),
               ErrorCode::kInvalidArgument);
    if (!std::is_sorted(bounds.begin(), bounds.end()))
      ctx.fail("cu_seqlens must be non-decreasing", ErrorCode::kInvalidArgument);
    return bounds;
  }
  int64_t batch = 0;
  if (l.tokenDims.size() == 2) {
    batch = l.tokenDims[0];
  } else {
    if (!state)
      ctx.fail("cu_seqlens is absent, so initial_state is required to determine the batch size",
               ErrorCode::kInvalidArgument);
    batch = state->rank() == 4 ? state->dim(0) : 0;
    if (batch <= 0 || l.tokens % batch != 0)
      ctx.fail("total_tokens (" + std::to_string(l.tokens) + ") must be a multiple of the batch " +
                   std::to_string(batch) + " of initial_state " + state->describe(),
               ErrorCode::kInvalidArgument);
  }
  // An empty input may declare any batch: the bounds are a buffer of its size.
  checkBuffer(ctx, batch, sizeof(int64_t), "the request bounds of batch " + std::to_string(batch));
  const int64_t length = batch == 0 ? 0 : l.tokens / batch;
  for (int64_t b = 0; b <= batch; ++b) bounds.push_back(b * length);
  return bounds;
}

void run(KernelContext& ctx, const Attrs& attrs) {
  auto optional = [&](size_t i) { return ctx.hasInput(i) ? &ctx.input(i) : nullptr; };
  const Tensor& query = ctx.input(0);
  const Tensor *key = optional(1), *value = optional(2), *cuSeqlens = optional(3);
  const Tensor *decay = optional(4), *beta = optional(5), *state = optional(6);
  const Tensor *aLog = optional(7), *dtBias = optional(8), *captureCount = optional(9);
  const Tensor* active = optional(10);
  const LinearAttentionRule rule = attrs.rule;
  if (rule.gated != (decay != nullptr) || rule.delta != (beta != nullptr)) {
    ctx.fail("update_rule '" + attrs.ruleName + "' " + (rule.gated ? "needs" : "forbids") +
                 " decay and " + (rule.delta ? "needs" : "forbids") + " beta",
             ErrorCode::kInvalidModel);
  }
  if ((attrs.gate != Gate::kNone) != (aLog && dtBias) ||
      (attrs.gate == Gate::kNone && (aLog || dtBias)))
    ctx.fail(attrs.gate != Gate::kNone
                 ? "gate_activation softplus / sigmoid needs a_log and dt_bias"
                 : "a_log and dt_bias need gate_activation softplus or sigmoid",
             ErrorCode::kInvalidModel);
  if ((attrs.capacity > 0) != (captureCount != nullptr))
    ctx.fail("capture_count must be present exactly when state_update_capacity is positive",
             ErrorCode::kInvalidModel);

  const Layout l = layoutOf(ctx, attrs, query, key, value, state);
  const std::vector<int64_t> bounds = requestBounds(ctx, l, cuSeqlens, state);
  const int64_t batch = static_cast<int64_t>(bounds.size()) - 1;
  const int64_t dk = l.dk, dv = l.dv, hv = l.vHeads;
  const int64_t headState = multiplyDims(attrs.label, dk, dv, "state size");
  const Shape stateShape{batch, hv, dv, dk};
  if (state && state->shape() != stateShape)
    ctx.fail("initial_state " + state->describe() + " must be [batch, num_heads_v, head_size_v," +
                 " head_size_qk] (V-major) = " + shapeToString(stateShape),
             ErrorCode::kInvalidArgument);

  Shape gateShape = l.tokenDims;
  gateShape.push_back(hv);
  Shape perKeyShape = gateShape;
  perKeyShape.push_back(dk);
  const bool perKey = decay && decay->shape() == perKeyShape;
  if (decay && !perKey && decay->shape() != gateShape)
    ctx.fail("decay " + decay->describe() + " must be [...tokens, num_heads_v] " +
                 shapeToString(gateShape) + " or [...tokens, num_heads_v, head_size_qk]",
             ErrorCode::kInvalidArgument);
  if (beta && beta->shape() != gateShape)
    ctx.fail("beta " + beta->describe() + " must be [...tokens, num_heads_v] " +
                 shapeToString(gateShape),
             ErrorCode::kInvalidArgument);
  const int64_t decayWidth = perKey ? hv * dk : hv;
  if (aLog && aLog->numel() != hv)
    ctx.fail("a_log " + aLog->describe() + " must be [num_heads_v]", ErrorCode::kInvalidArgument);
  const bool biasPerKey = dtBias && perKey && dtBias->numel() == hv * dk && dtBias->numel() != hv;
  if (dtBias && !((dtBias->rank() == 1 && dtBias->numel() == hv) ||
                  (perKey && dtBias->numel() == hv * dk &&
                   (dtBias->rank() == 1 || (dtBias->rank() == 2 && dtBias->dim(0) == hv))))) {
    ctx.fail("dt_bias " + dtBias->describe() + " must be [num_heads_v] or (for per-key-dim" +
                 " decay) [num_heads_v, head_size_qk] / [num_heads_v * head_size_qk]",
             ErrorCode::kInvalidArgument);
  }
  if (captureCount && (captureCount->rank() != 1 || captureCount->dim(0) != batch))
    ctx.fail("capture_count " + captureCount->describe() + " must be [batch] with batch " +
                 std::to_string(batch),
             ErrorCode::kInvalidArgument);
  if (active && active->numel() != 1)
    ctx.fail("state_update_active " + active->describe() + " must be [1]",
             ErrorCode::kInvalidArgument);
  const bool capturing = attrs.capacity > 0 && !(active && active->data<int32_t>()[0] == 0);

  const int64_t C = attrs.capacity, kWidth = l.qkHeads * dk, vWidth = hv * dv;
  const int64_t updateRow =
      multiplyDims(attrs.label, C,
                   addDims(attrs.label, addDims(attrs.label, decayWidth, kWidth, "state_update"),
                           vWidth, "state_update"),
                   "state_update");
  const int64_t stateCount = multiplyDims(
      attrs.label, multiplyDims(attrs.label, batch, hv, "state size"), headState, "state size");
  const int64_t updateCount = multiplyDims(attrs.label, batch, updateRow, "state_update size");
  checkBuffer(ctx, addDims(attrs.label, stateCount, updateCount, "state size"), sizeof(float),
              "the float state and state_update");
  const float scale = attrs.scale == 0.0f ? 1.0f / std::sqrt(static_cast<float>(dk)) : attrs.scale;

  const std::vector<float> q = floatValues(query, kOp);
  const std::vector<float> k = key ? floatValues(*key, kOp) : std::vector<float>{};
  const std::vector<float> v = value ? floatValues(*value, kOp) : std::vector<float>{};
  const float* kData = key ? k.data() : q.data() + l.kOffset;
  const float* vData = value ? v.data() : q.data() + l.vOffset;
  const std::vector<float> rawDecay = decay ? floatValues(*decay, kOp) : std::vector<float>{};
  const std::vector<float> rawBeta = beta ? floatValues(*beta, kOp) : std::vector<float>{};
  const float* aLogData = aLog ? aLog->data<float>() : nullptr;
  const float* biasData = dtBias ? dtBias->data<float>() : nullptr;
  std::vector<float> finalState =
      state ? floatValues(*state, kOp) : std::vector<float>(static_cast<size_t>(stateCount), 0.0f);
  std::vector<float> update(static_cast<size_t>(updateCount), 0.0f);
  std::vector<float> out(
      static_cast<size_t>(multiplyDims(attrs.label, l.tokens, vWidth, "output size")), 0.0f);
  std::vector<float> s(static_cast<size_t>(headState)), added(static_cast<size_t>(dv));
  std::vector<float> qt(static_cast<size_t>(dk)), kt(static_cast<size_t>(dk)),
      g(static_cast<size_t>(dk));
  const int64_t group = hv / l.qkHeads;
  // No token or value column: nothing to compute, and the head loop is bounded by no tensor.
  const int64_t heads = l.tokens == 0 || dv == 0 ? 0 : hv;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t captures = capturing ? std::clamp<int64_t>(captureCount->data<int32_t>()[b], 0,
                                                             std::min(C, bounds[b + 1] - bounds[b]))
                                       : 0;
    float* row = update.data() + b * updateRow;
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t hqk = h / group;
      float* headS = finalState.data() + (b * hv + h) * headState;
      for (int64_t d = 0; d < dk; ++d)
        for (int64_t m = 0; m < dv; ++m) s[d * dv + m] = headS[m * dk + d];
      for (int64_t t = bounds[b]; t < bounds[b + 1]; ++t) {
        const float* qIn = q.data() + t * l.qRow + hqk * dk;
        const float* kIn = kData + t * l.kRow + hqk * dk;
        float qNorm = 1.0f, kNorm = 1.0f;
        if (attrs.l2Norm) {
          float qs = 0, ks = 0;
          for (int64_t d = 0; d < dk; ++d) qs += qIn[d] * qIn[d], ks += kIn[d] * kIn[d];
          qNorm = 1.0f / std::sqrt(qs + 1e-12f), kNorm = 1.0f / std::sqrt(ks + 1e-12f);
        }
        for (int64_t d = 0; d < dk; ++d) qt[d] = qIn[d] * qNorm, kt[d] = kIn[d] * kNorm;
        LinearAttentionToken token;
        token.k = kt.data();
        token.v = vData + t * l.vRow + h * dv;
        const int64_t gates = perKey ? dk : 1;
        if (decay) {
          for (int64_t d = 0; d < gates; ++d) {
            const float x = rawDecay[(t * hv + h) * gates + d];
            const float bias = biasData ? biasData[biasPerKey ? h * dk + d : h] : 0.0f;
            if (attrs.gate == Gate::kSoftplus)
              g[d] = -std::exp(aLogData[h]) * softplus(x + bias);
            else if (attrs.gate == Gate::kSigmoid)
              g[d] = attrs.lowerBound * stableSigmoid(std::exp(aLogData[h]) * (x + bias));
            else
              g[d] = x;
          }
          token.logDecay = g.data();
          token.decayPerKey = perKey;
        }
        if (beta) {
          const float x = rawBeta[t * hv + h];
          token.beta = attrs.betaSigmoid ? stableSigmoid(x) : x;
        }
        linearAttentionStep(s.data(), dk, dv, rule, token, added.data());
        linearAttentionReadout(s.data(), dk, dv, qt.data(), scale, out.data() + (t * hv + h) * dv);
        const int64_t slot = t - bounds[b];
        if (slot < captures) {
          for (int64_t d = 0; d < gates; ++d)
            row[slot * decayWidth + h * gates + d] = decay ? std::exp(g[d]) : 1.0f;
          float* keys = row + C * decayWidth + slot * kWidth + hqk * dk;
          std::copy(kt.begin(), kt.end(), keys);
          float* deltas = row + C * (decayWidth + kWidth) + slot * vWidth + h * dv;
          std::copy(added.begin(), added.end(), deltas);
        }
      }
      for (int64_t d = 0; d < dk; ++d)
        for (int64_t m = 0; m < dv; ++m) headS[m * dk + d] = s[d * dv + m];
    }
  }
  Shape outShape = gateShape;
  outShape.push_back(dv);
  storeFloats(out, ctx.allocateOutput(0, query.dtype(), outShape), kOp);
  if (ctx.wantsOutput(1))
    storeFloats(finalState, ctx.allocateOutput(1, DataType::kFloat32, stateShape), kOp);
  if (ctx.wantsOutput(2))
    storeFloats(update, ctx.allocateOutput(2, DataType::kFloat32, {batch, updateRow}), kOp);
}

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "GatedDeltaNet", bindKernel(readAttrs, run));

}  // namespace
}  // namespace kiln::cpu
