// The fused attention of kiln::FusedAttention (fused_attention.cpp), shared with the com.microsoft
// attention ops: Y = softmax(scale * Q K^T + mask) V per batch and head, heads read in place.
#pragma once
#include <cstdint>
#include <functional>

#include "backends/cpu/kernel.h"

namespace kiln::cpu {

// Q, K and V as row-major [batch, length] rows, each row holding the heads side by side; or, with
// the batch and head strides set, any layout whose rows of one head are qRow (kRow, vRow) apart,
// such as a [batch, heads, length, dim] (BNSH) KV cache.
struct AttentionOperands {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t qRow = 0, kRow = 0, vRow = 0;  // floats from one row to the next
  int64_t B = 0, Sq = 0, Sk = 0, H = 0, Dk = 0, Dv = 0;
  // Floats from one batch entry (head) to the next; -1: length * row (the head size), the
  // heads-side-by-side rows above.
  int64_t qBatch = -1, qHead = -1, kBatch = -1, kHead = -1, vBatch = -1, vHead = -1;
  int64_t kvGroup =
      1;  // query heads per key/value head: query head h reads K and V head h / kvGroup
};

/// What some attention ops add to the plain softmax(scale * Q K^T + mask) V.
struct AttentionOptions {
  float softcap = 0.0f;  // > 0: each score s becomes softcap * tanh(s / softcap), before the mask
  // Smooth softmax: an extra logit in each row's denominator (no value), per query head from
  // `sinks` (null: 0 for every head).
  bool smoothSoftmax = false;
  const float* sinks = nullptr;
  // The keys query i of batch entry b sees: [keyBegin[b * Sq + i], keyEnd[b * Sq + i]) (null: all
  // Sk); the other scores of the row are 0 in the probabilities (and in qk).
  const int64_t* keyBegin = nullptr;
  const int64_t* keyEnd = nullptr;
  // qk [B, H, Sq, Sk] (null: not wanted) receives each row's scores after the softcap and the mask
  // (qkAfterSoftmax false) or its probabilities (true).
  float* qk = nullptr;
  bool qkAfterSoftmax = false;
  bool plain() const { return softcap <= 0 && !smoothSoftmax && !keyEnd && !qk; }
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
KILN_INTERNAL_API void fusedAttention(KernelContext& ctx, const AttentionOperands& o,
                                      const Tensor* mask, float scale, Tensor& y,
                                      const AttentionOptions& options = {});

/// Runs `run`, a float32 kernel, on ctx; when ctx's input 0 is float16 or bfloat16, on float copies
/// of its 16-bit float inputs instead, its float outputs rounded back into input 0's type (the
/// com.microsoft attention ops' float16 kernels, which onnxruntime also computes in float). `run`
/// must allocate its outputs with allocateOutput (their inferred types are the 16-bit ones).
void runAttentionInFloat(KernelContext& ctx, const std::function<void(KernelContext&)>& run);

}  // namespace kiln::cpu
