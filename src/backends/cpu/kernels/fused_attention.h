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

/// Scratch bytes fusedAttention needs on `threads` threads for operands of these sizes: per
/// thread, one block of query rows' scores and the packing of its two products.
uint64_t fusedAttentionWorkspaceBytes(int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t Dk,
                                      int64_t Dv, int threads);

/// y [B, Sq, H, Dv] = softmax(scale * Q K^T + mask) V; mask (null: none) is float32 and broadcasts
/// to [B, H, Sq, Sk]. Fails naming the node when the mask does not fit. Its scratch is
/// ctx.workspace (fusedAttentionWorkspaceBytes for the pool's threads).
void fusedAttention(KernelContext& ctx, const AttentionOperands& o, const Tensor* mask, float scale,
                    Tensor& y);

}  // namespace kiln::cpu
