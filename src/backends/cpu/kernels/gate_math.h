// The scalar gate functions of the linear-attention ops (LinearAttentionGate, GatedDeltaNet), in
// float32 as onnxruntime computes their gates.
#pragma once
#include <cmath>

namespace kiln::cpu {

/// log(1 + exp(v)) without overflow of exp for large v.
inline float softplus(float v) {
  return v > 0.0f ? v + std::log(std::exp(-v) + 1.0f) : std::log(std::exp(v) + 1.0f);
}

/// 1 / (1 + exp(-v)) without overflow of exp for very negative v.
inline float stableSigmoid(float v) {
  if (v >= 0.0f) return 1.0f / (1.0f + std::exp(-v));
  const float e = std::exp(v);
  return e / (1.0f + e);
}

}  // namespace kiln::cpu
