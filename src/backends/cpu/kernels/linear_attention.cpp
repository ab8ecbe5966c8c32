// CPU kernel of LinearAttention: a recurrent state S (dk x dv) per batch and key/value head.
// Each step optionally decays S by exp(decay) (gated rules), optionally replaces v by
// beta * (v - S^T k) (delta rules), adds k v^T, and reads scale * S^T q for every query head of
// the group. Computed in float, as the reference does.
#include <cmath>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "ir/shape_helpers.h"

namespace kiln::cpu {
namespace {

/// A float tensor's values as float.
std::vector<float> floatValues(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  dispatchFloat(t.dtype(), "LinearAttention", [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<float>(static_cast<ComputeType<T>>(t.data<T>()[i]));
  });
  return v;
}

void storeFloats(const std::vector<float>& v, Tensor& t) {
  dispatchFloat(t.dtype(), "LinearAttention", [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t i = 0; i < v.size(); ++i)
      t.data<T>()[i] = static_cast<T>(static_cast<ComputeType<T>>(v[i]));
  });
}

struct LinearAttentionAttrs {
  std::string rule;
  int64_t qHeads = 0, kvHeads = 0;
  double scale = 0;
};

LinearAttentionAttrs linearAttentionAttrs(const ir::Node& node) {
  return {ir::attrString(node, "update_rule", "gated_delta"), ir::attrInt(node, "q_num_heads"),
          ir::attrInt(node, "kv_num_heads"), ir::attrFloat(node, "scale", 0.0f)};
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
  const bool decayPerFeature = decay && decay->dim(2) == kvHeads * dk;
  if (decay && (decay->rank() != 3 || (decay->dim(2) != kvHeads && !decayPerFeature))) {
    ctx.fail("decay " + decay->describe() + " must end in kv_num_heads or kv_num_heads * dk",
             ErrorCode::kInvalidArgument);
  }
  if (beta && (beta->rank() != 3 || (beta->dim(2) != kvHeads && beta->dim(2) != 1))) {
    ctx.fail("beta " + beta->describe() + " must end in kv_num_heads or 1",
             ErrorCode::kInvalidArgument);
  }
  const double scaleAttr = attrs.scale;
  const float scale =
      scaleAttr == 0.0 ? 1.0f / std::sqrt(static_cast<float>(dk)) : static_cast<float>(scaleAttr);

  const std::vector<float> q = floatValues(query), k = floatValues(key), v = floatValues(value);
  const std::vector<float> g = decay ? floatValues(*decay) : std::vector<float>{};
  const std::vector<float> bt = beta ? floatValues(*beta) : std::vector<float>{};
  std::vector<float> state =
      past ? floatValues(*past)
           : std::vector<float>(static_cast<size_t>(batches * kvHeads * dk * dv), 0.0f);
  std::vector<float> out(static_cast<size_t>(batches * steps * qHeads * dv), 0.0f);
  std::vector<float> vt(static_cast<size_t>(dv));
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t h = 0; h < kvHeads; ++h) {
      float* s = state.data() + (b * kvHeads + h) * dk * dv;
      for (int64_t t = 0; t < steps; ++t) {
        const float* kt = k.data() + (b * steps + t) * kvHeads * dk + h * dk;
        const float* vIn = v.data() + (b * steps + t) * kvHeads * dv + h * dv;
        if (gated) {
          for (int64_t d = 0; d < dk; ++d) {
            const int64_t gi = (b * steps + t) * decay->dim(2) + (decayPerFeature ? h * dk + d : h);
            const float factor = std::exp(g[gi]);
            for (int64_t m = 0; m < dv; ++m) s[d * dv + m] *= factor;
          }
        }
        for (int64_t m = 0; m < dv; ++m) vt[m] = vIn[m];
        if (delta) {
          const float bv = bt[(b * steps + t) * beta->dim(2) + (beta->dim(2) == 1 ? 0 : h)];
          for (int64_t m = 0; m < dv; ++m) {
            float retrieved = 0;
            for (int64_t d = 0; d < dk; ++d) retrieved += s[d * dv + m] * kt[d];
            vt[m] = bv * (vt[m] - retrieved);
          }
        }
        for (int64_t d = 0; d < dk; ++d)
          for (int64_t m = 0; m < dv; ++m) s[d * dv + m] += kt[d] * vt[m];
        for (int64_t qh = h * group; qh < (h + 1) * group; ++qh) {
          const float* qt = q.data() + (b * steps + t) * qHeads * dk + qh * dk;
          float* o = out.data() + (b * steps + t) * qHeads * dv + qh * dv;
          for (int64_t m = 0; m < dv; ++m) {
            float sum = 0;
            for (int64_t d = 0; d < dk; ++d) sum += qt[d] * s[d * dv + m];
            o[m] = scale * sum;
          }
        }
      }
    }
  }
  storeFloats(out, ctx.allocateOutput(0, query.dtype(), {batches, steps, qHeads * dv}));
  if (ctx.wantsOutput(1))
    storeFloats(state, ctx.allocateOutput(1, past ? past->dtype() : query.dtype(),
                                          {batches, kvHeads, dk, dv}));
}

KILN_REGISTER_CPU_KERNEL("LinearAttention",
                         bindKernel(linearAttentionAttrs, linearAttentionKernel));

}  // namespace
}  // namespace kiln::cpu
