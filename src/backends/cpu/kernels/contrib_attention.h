// What the com.microsoft attention kernels share (contrib_attention.cpp): their attributes, the
// additive mask of a mask index, causal masking and an attention bias, and the KV caches' layout.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/fused_attention.h"

namespace kiln::cpu {

/// The attributes of Attention, QAttention, MultiHeadAttention and DecoderMaskedMultiHeadAttention.
struct AttentionAttrs {
  int64_t heads = 0;
  bool unidirectional = false;
  float maskFilter = -10000.0f;
  float scale = 0.0f;                // 0: 1 / sqrt(head size)
  std::vector<int64_t> hiddenSizes;  // Attention's qkv_hidden_sizes (empty: thirds)
};

AttentionAttrs attentionAttrs(const KernelCreateInfo& info);

/// The additive mask [B, Hm, S, T] (Hm: the attention bias's heads, or 1) of a mask index (input
/// `indexInput`: [B] key lengths, [B, T] or [B, S, T] 0/1), the causal mask and an attention bias
/// (input `biasInput`), or nullopt when none applies; fails naming the node when a shape does not
/// fit.
std::optional<Tensor> attentionMask(const KernelContext& ctx, const AttentionAttrs& a,
                                    size_t indexInput, size_t biasInput, int64_t B, int64_t S,
                                    int64_t T);

/// The attribute's scale, or 1 / sqrt(head size) when it is 0.
float scaleFor(const AttentionAttrs& a, int64_t headSize);

/// cache [B, N, P + L, D] (BNSH): the P rows of each head of past [B, N, P, D] (null: P = 0), then
/// the L new rows of `rows` ([B, L] rows `rowStride` apart, head n at n * D), plus `bias` (null:
/// none) of width N * D.
void fillCache(const float* past, int64_t P, const float* rows, int64_t rowStride,
               const float* bias, int64_t B, int64_t N, int64_t L, int64_t D, float* cache);

/// Points o's K and V (T keys) at BNSH caches [B, N, T, Dk] and [B, N, T, Dv].
void readCaches(AttentionOperands& o, const float* keys, const float* values, int64_t T);

/// t [B, L, width] plus bias[offset, offset + width) into a copy kept in `owned`, or t's own data
/// when bias is null.
const float* biasedRows(const Tensor& t, const float* bias, int64_t offset,
                        std::vector<Tensor>& owned);

/// Fails naming the node and `name` unless t has the shape `want` (`layout` names its axes).
void requireLayout(const KernelContext& ctx, const Tensor& t, const Shape& want, const char* name,
                   const char* layout);

}  // namespace kiln::cpu
