// The fused attention of kiln::FusedAttention (fused_attention.cpp), shared with the com.microsoft
// attention ops: Y = softmax(scale * Q K^T + mask) V per batch and head, heads read in place.
#pragma once
#include <cstdint>

#include "backends/cpu/kernel.h"

namespace kiln::cpu {

// Q, K and V as row-major [batch, length] rows, each row holding the heads side by side.
struct AttentionOperands {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t qRow = 0, kRow = 0, vRow = 0;  // floats from one row to the next
  int64_t B = 0, Sq = 0, Sk = 0, H = 0, Dk = 0, Dv = 0;
};

/// The packed form: `qkv` [B, S, 3 * heads * D], rows of [Q | K | V] each heads * D wide; fails
/// naming the node when it does not have that shape.
AttentionOperands packedAttentionOperands(const KernelContext& ctx, const Tensor& qkv,
                                          int64_t heads);

/// y [B, Sq, H, Dv] = softmax(scale * Q K^T + mask) V; mask (null: none) is float32 and broadcasts
/// to [B, H, Sq, Sk]. Fails naming the node when the mask does not fit.
void fusedAttention(const KernelContext& ctx, const AttentionOperands& o, const Tensor* mask,
                    float scale, Tensor& y);

}  // namespace kiln::cpu
