#include "backends/cpu/kernels/linear_attention_recurrence.h"

#include <cmath>

#include "backends/cpu/kernels/elementwise_util.h"
#include "core/tensor_limits.h"

namespace kiln::cpu {

std::optional<LinearAttentionRule> linearAttentionRule(const std::string& name) {
  if (name == "linear") return LinearAttentionRule{false, false};
  if (name == "gated") return LinearAttentionRule{true, false};
  if (name == "delta") return LinearAttentionRule{false, true};
  if (name == "gated_delta") return LinearAttentionRule{true, true};
  return std::nullopt;
}

void linearAttentionStep(float* s, int64_t dk, int64_t dv, LinearAttentionRule rule,
                         const LinearAttentionToken& token, float* added) {
  if (rule.gated) {
    for (int64_t d = 0; d < dk; ++d) {
      const float factor = std::exp(token.logDecay[token.decayPerKey ? d : 0]);
      for (int64_t m = 0; m < dv; ++m) s[d * dv + m] *= factor;
    }
  }
  for (int64_t m = 0; m < dv; ++m) added[m] = token.v[m];
  if (rule.delta) {
    for (int64_t m = 0; m < dv; ++m) {
      float retrieved = 0;
      for (int64_t d = 0; d < dk; ++d) retrieved += s[d * dv + m] * token.k[d];
      added[m] = token.beta * (added[m] - retrieved);
    }
  }
  for (int64_t d = 0; d < dk; ++d)
    for (int64_t m = 0; m < dv; ++m) s[d * dv + m] += token.k[d] * added[m];
}

void linearAttentionReadout(const float* s, int64_t dk, int64_t dv, const float* q, float scale,
                            float* out) {
  for (int64_t m = 0; m < dv; ++m) {
    float sum = 0;
    for (int64_t d = 0; d < dk; ++d) sum += q[d] * s[d * dv + m];
    out[m] = scale * sum;
  }
}

std::vector<float> floatValues(const Tensor& t, const char* op) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  dispatchFloat(t.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<float>(static_cast<ComputeType<T>>(t.data<T>()[i]));
  });
  return v;
}

void storeFloats(const std::vector<float>& v, Tensor& t, const char* op) {
  dispatchFloat(t.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t i = 0; i < v.size(); ++i)
      t.data<T>()[i] = static_cast<T>(static_cast<ComputeType<T>>(v[i]));
  });
}

void checkBuffer(const KernelContext& ctx, int64_t count, uint64_t elementBytes,
                 const std::string& what) {
  if (static_cast<uint64_t>(count) > allocationLimitBytes() / elementBytes) {
    ctx.fail(what + " needs " + std::to_string(count) + " values, " + allocationLimitText(),
             ErrorCode::kInvalidArgument);
  }
}

}  // namespace kiln::cpu
