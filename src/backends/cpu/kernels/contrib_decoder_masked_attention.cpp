// CPU kernel of com.microsoft DecoderMaskedMultiHeadAttention
// (ir/ops/contrib_decoder_masked_attention.cpp), float32, on kiln::FusedAttention's fused
// attention (fused_attention.h), as onnxruntime's CPU kernel computes it:
// - self-attention: present_key / present_value are the past buffers [B, N, M, H] with the new
//   key and value (plus their bias slices) written at row P = past_sequence_length, and the query
//   sees keys 0..P. In a beam search (beam_width W > 1), key row t < P of batch entry b is that of
//   entry (b / W) * W + cache_indirection[b / W, b % W, t] (the beam the token came from);
// - cross-attention (no past): key and value are the encoder's cache [B, N, L, H];
// - mask_index [B, T] (0 = masked, mask_filter_value added) and attention_bias add to the scaled
//   scores, which qk receives (output_qk = 1) before the softmax.
#include <algorithm>
#include <string>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/contrib_attention.h"

namespace kiln::cpu {
namespace {

// The present buffers' keys and values gathered per beam: row t < P of entry b from the entry of
// the beam cache_indirection names (same batch group), row P its own; [B, N, P + 1, D] each.
void gatherBeams(const KernelContext& ctx, const float* present, int64_t B, int64_t N, int64_t M,
                 int64_t D, int64_t P, int64_t width, float* out) {
  const Tensor& indirection = ctx.input(9);
  if (indirection.rank() != 3 || indirection.dim(0) * indirection.dim(1) != B ||
      indirection.dim(1) != width || indirection.dim(2) < P) {
    ctx.fail("cache_indirection " + indirection.describe() + " must be [batch / beam_width, " +
                 "beam_width " + std::to_string(width) + ", at least " + std::to_string(P) +
                 " steps] for batch " + std::to_string(B),
             ErrorCode::kInvalidArgument);
  }
  const int64_t steps = indirection.dim(2), T = P + 1;
  const int32_t* beams = indirection.data<int32_t>();
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      int64_t source = b;
      if (t < P) {
        const int64_t beam = beams[b * steps + t];
        if (beam < 0 || beam >= width) {
          ctx.fail("cache_indirection names beam " + std::to_string(beam) + " of " +
                       std::to_string(width),
                   ErrorCode::kInvalidArgument);
        }
        source = b / width * width + beam;
      }
      for (int64_t n = 0; n < N; ++n)
        std::copy_n(present + ((source * N + n) * M + t) * D, D, out + ((b * N + n) * T + t) * D);
    }
  }
}

// The one value of scalar input i (past_sequence_length, beam_width), `otherwise` when omitted.
int64_t scalarInput(const KernelContext& ctx, size_t i, const char* name, int64_t otherwise) {
  if (!ctx.hasInput(i)) return otherwise;
  if (ctx.input(i).numel() != 1) {
    ctx.fail(std::string(name) + " " + ctx.input(i).describe() + " must hold one value",
             ErrorCode::kInvalidArgument);
  }
  return ctx.input(i).intAt(0);
}

void runDecoderMaskedAttention(KernelContext& ctx, const AttentionAttrs& a, bool outputQk) {
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  const int64_t N = a.heads;
  if (q.rank() != 3 || q.dim(1) != 1 || q.dim(2) % N != 0) {
    ctx.fail("query " + q.describe() + " must be [batch, 1, num_heads * head size]",
             ErrorCode::kInvalidArgument);
  }
  const int64_t B = q.dim(0), D = q.dim(2), H = D / N;
  const bool self = ctx.hasInput(5);
  const int64_t Dv = self ? (v.rank() == 3 ? v.dim(2) / N : 0) : (v.rank() == 4 ? v.dim(3) : 0);
  if (Dv != H) {
    ctx.fail("value " + v.describe() + " must have the query's head size " + std::to_string(H),
             ErrorCode::kInvalidArgument);
  }
  const float* bias = nullptr;
  if (ctx.hasInput(10)) {
    if (ctx.input(10).numel() != 3 * D) {
      ctx.fail(
          "bias " + ctx.input(10).describe() + " must hold " + std::to_string(3 * D) + " values",
          ErrorCode::kInvalidArgument);
    }
    bias = ctx.input(10).data<float>();
  }
  std::vector<Tensor> owned;
  owned.reserve(6);
  AttentionOperands o{biasedRows(q, bias, 0, owned), nullptr, nullptr, D, 0, 0, B, 1, 0, N, H, H};
  if (!self) {
    const int64_t L = k.rank() == 4 ? k.dim(2) : 0;
    requireLayout(ctx, k, Shape{B, N, L, H}, "key", "[batch, num_heads, length, head size]");
    requireLayout(ctx, v, Shape{B, N, L, H}, "value", "[batch, num_heads, length, head size]");
    readCaches(o, k.data<float>(), v.data<float>(), L);
  } else {
    const Tensor& pastK = ctx.input(5);
    const int64_t M = pastK.rank() == 4 ? pastK.dim(2) : 0;
    requireLayout(ctx, pastK, Shape{B, N, M, H}, "past_key",
                  "[batch, num_heads, max length, head size]");
    requireLayout(ctx, ctx.input(6), Shape{B, N, M, H}, "past_value",
                  "[batch, num_heads, max length, head size]");
    requireLayout(ctx, k, Shape{B, 1, D}, "key", "[batch, 1, hidden]");
    requireLayout(ctx, v, Shape{B, 1, D}, "value", "[batch, 1, hidden]");
    const int64_t P = scalarInput(ctx, 7, "past_sequence_length", 0);
    if (P < 0 || P >= M) {
      ctx.fail("past_sequence_length " + std::to_string(P) + " leaves no row for the new token " +
                   "in the past buffer of " + std::to_string(M) + " rows",
               ErrorCode::kInvalidArgument);
    }
    float* caches[2];
    for (int i = 0; i < 2; ++i) {
      const Tensor& past = ctx.input(5 + i);
      Tensor& present = ctx.wantsOutput(1 + i)
                            ? ctx.allocateOutput(1 + i, DataType::kFloat32, past.shape())
                            : owned.emplace_back(DataType::kFloat32, past.shape());
      caches[i] = present.data<float>();
      std::copy_n(past.data<float>(), past.numel(), caches[i]);
      const float* rows = (i == 0 ? k : v).data<float>();
      const float* add = bias ? bias + (1 + i) * D : nullptr;
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t n = 0; n < N; ++n) {
          float* row = caches[i] + ((b * N + n) * M + P) * H;
          for (int64_t d = 0; d < H; ++d)
            row[d] = rows[b * D + n * H + d] + (add ? add[n * H + d] : 0.0f);
        }
      }
    }
    const int64_t width = scalarInput(ctx, 8, "beam_width", 1);
    if (width > 1) {
      if (!ctx.hasInput(9))
        ctx.fail("beam_width " + std::to_string(width) + " needs cache_indirection",
                 ErrorCode::kInvalidArgument);
      float* gathered[2];
      for (int i = 0; i < 2; ++i) {
        gathered[i] = owned.emplace_back(DataType::kFloat32, Shape{B, N, P + 1, H}).data<float>();
        gatherBeams(ctx, caches[i], B, N, M, H, P, width, gathered[i]);
      }
      readCaches(o, gathered[0], gathered[1], P + 1);
    } else {
      readCaches(o, caches[0], caches[1], M);
      o.Sk = P + 1;  // the rows past the new token are not keys yet
    }
  }
  const std::optional<Tensor> mask = attentionMask(ctx, a, 3, 4, B, 1, o.Sk);
  AttentionOptions options;
  if (outputQk && ctx.wantsOutput(3))
    options.qk = ctx.allocateOutput(3, DataType::kFloat32, Shape{B, N, 1, o.Sk}).data<float>();
  Tensor& y = ctx.allocateOutput(0, DataType::kFloat32, Shape{B, 1, D});
  fusedAttention(ctx, o, mask ? &*mask : nullptr, scaleFor(a, H), y, options);
}

Kernel makeDecoderMaskedAttentionKernel(const KernelCreateInfo& info) {
  const AttentionAttrs a = attentionAttrs(info);
  const bool outputQk = ir::attrInt(info.node, "output_qk", 0) != 0;
  return {[a, outputQk](KernelContext& ctx) {
            runAttentionInFloat(
                ctx, [&](KernelContext& c) { runDecoderMaskedAttention(c, a, outputQk); });
          },
          [a](const std::vector<const Shape*>& in, int threads) -> uint64_t {
            if (in.size() < 3 || !in[0] || !in[1] || in[0]->size() != 3 || a.heads <= 0) return 0;
            const Shape& q = *in[0];
            const Shape* past = in.size() > 5 ? in[5] : nullptr;
            const int64_t T = past && past->size() == 4 ? (*past)[2]
                              : in[1]->size() == 4      ? (*in[1])[2]
                                                        : 1;
            const int64_t H = q[2] / a.heads;
            return fusedAttentionWorkspaceBytes(q[0], 1, T, a.heads, H, H, threads);
          },
          {}};
}

const bool kRegistered = [] {
  KernelRegistry::global().addGenericKernel("com.microsoft", "DecoderMaskedMultiHeadAttention",
                                            makeDecoderMaskedAttentionKernel);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
