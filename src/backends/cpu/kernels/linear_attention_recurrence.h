// The linear-attention recurrence, one token at a time on one head's (dk x dv) state S, shared by
// ONNX LinearAttention and com.microsoft LinearAttention and GatedDeltaNet: each update rule has
// this one implementation, computed in float as onnxruntime does.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/kernel.h"
#include "kiln/tensor.h"

namespace kiln::cpu {

/// Which terms of S_t = exp(g_t) S_{t-1} + k_t (beta_t (v_t - exp(g_t) S_{t-1}^T k_t))^T are
/// present: `gated` the decay, `delta` the retrieval and beta.
struct LinearAttentionRule {
  bool gated = false;
  bool delta = false;
};

/// "linear", "gated", "delta" or "gated_delta"; nullopt for any other name.
std::optional<LinearAttentionRule> linearAttentionRule(const std::string& name);

/// One token's inputs for one head: k (dk values), v (dv), the log-space decay (dk values when
/// decayPerKey, else one; read for gated rules) and beta (read for delta rules).
struct LinearAttentionToken {
  const float* k = nullptr;
  const float* v = nullptr;
  const float* logDecay = nullptr;
  bool decayPerKey = false;
  float beta = 1.0f;
};

/// Advances s (dk rows of dv) by one token and leaves in `added` (dv values) the vector whose
/// outer product with k was added: beta * (v - S^T k) for delta rules, else v.
void linearAttentionStep(float* s, int64_t dk, int64_t dv, LinearAttentionRule rule,
                         const LinearAttentionToken& token, float* added);

/// out = scale * S^T q: q has dk values, out dv.
void linearAttentionReadout(const float* s, int64_t dk, int64_t dv, const float* q, float scale,
                            float* out);

/// A float tensor's values as float (`op` names the op in a dtype refusal).
std::vector<float> floatValues(const Tensor& t, const char* op);
/// Stores float values into a float tensor of any float dtype, rounding to it.
void storeFloats(const std::vector<float>& v, Tensor& t, const char* op);
/// Fails naming the node when `count` values of `elementBytes` each (a buffer sized by dims an
/// empty input may declare) would pass the allocation limit.
void checkBuffer(const KernelContext& ctx, int64_t count, uint64_t elementBytes,
                 const std::string& what);

}  // namespace kiln::cpu
