// CPU kernels of com.microsoft Attention, QAttention and MultiHeadAttention
// (ir/ops/contrib_attention.cpp), float32, on the fused attention of kiln::FusedAttention
// (fused_attention.h): Attention's Q, K and V projections as one GEMM into a packed [B, S, 3 *
// hidden] buffer, MultiHeadAttention's projected query, key and value read in place (copied when a
// bias is added). The mask index, unidirectional and the attention bias become one additive mask
// [B, heads or 1, S, T] as ONNX Runtime applies them.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/contrib_quantized_matmul.h"
#include "backends/cpu/kernels/fused_attention.h"

namespace kiln::cpu {
namespace {

constexpr size_t kNoBias = 1000;  // an input index past the node's: no attention bias

struct AttentionAttrs {
  int64_t heads = 0;
  bool unidirectional = false;
  float maskFilter = -10000.0f;
  float scale = 0.0f;  // 0: 1 / sqrt(head size)
};

// Whether key j (of T) of batch entry b is masked for query i (of S) by a mask index (null: none):
// [B] key lengths, [B, T] or [B, S, T] with 0 where masked.
bool maskedByIndex(const Tensor* index, int64_t b, int64_t i, int64_t j, int64_t S, int64_t T) {
  if (!index) return false;
  const int32_t* m = index->data<int32_t>();
  if (index->rank() == 1) return j >= m[b];
  if (index->rank() == 2) return m[b * T + j] == 0;
  return m[(b * S + i) * T + j] == 0;
}

// The additive mask [B, Hm, S, T] (Hm: the attention bias's heads, or 1) of a mask index (input
// `indexInput`), the causal mask and an attention bias (input `biasInput`), or nullopt when none
// applies.
std::optional<Tensor> attentionMask(const KernelContext& ctx, const AttentionAttrs& a,
                                    size_t indexInput, size_t biasInput, int64_t B, int64_t S,
                                    int64_t T) {
  const Tensor* index = ctx.hasInput(indexInput) ? &ctx.input(indexInput) : nullptr;
  const Tensor* bias = ctx.hasInput(biasInput) ? &ctx.input(biasInput) : nullptr;
  if (!index && !bias && !a.unidirectional) return std::nullopt;
  const std::string dims = std::to_string(S) + ", " + std::to_string(T);
  if (index) {
    const Shape& s = index->shape();
    const bool fits = (s.size() == 1 && s[0] == B) || (s.size() == 2 && s == Shape{B, T}) ||
                      (s.size() == 3 && s == Shape{B, S, T});
    if (!fits) {
      ctx.fail("mask " + index->describe() +
                   " is not one kiln supports: [batch] key lengths, [batch, " + std::to_string(T) +
                   "] or [batch, " + dims + "] 0/1 masks",
               ErrorCode::kUnsupportedNode);
    }
  }
  int64_t biasHeads = 1, biasBatch = 1;
  if (bias) {
    const Shape& s = bias->shape();
    if (s.size() != 4 || (s[0] != 1 && s[0] != B) || (s[1] != 1 && s[1] != a.heads) || s[2] != S ||
        s[3] != T) {
      ctx.fail("attention_bias " + bias->describe() + " must be [batch or 1, num_heads or 1, " +
                   dims + "]",
               ErrorCode::kInvalidArgument);
    }
    biasBatch = s[0];
    biasHeads = s[1];
  }
  Tensor mask(DataType::kFloat32, Shape{B, biasHeads, S, T});
  float* out = mask.data<float>();
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < biasHeads; ++h) {
      for (int64_t i = 0; i < S; ++i) {
        for (int64_t j = 0; j < T; ++j) {
          const bool masked =
              maskedByIndex(index, b, i, j, S, T) || (a.unidirectional && j > i + T - S);
          float v = masked ? a.maskFilter : 0.0f;
          if (bias)
            v += bias->data<float>()[(((biasBatch == 1 ? 0 : b) * biasHeads + h) * S + i) * T + j];
          *out++ = v;
        }
      }
    }
  }
  return mask;
}

float scaleFor(const AttentionAttrs& a, int64_t headSize) {
  return a.scale == 0.0f ? 1.0f / std::sqrt(static_cast<float>(headSize)) : a.scale;
}

void checkAttentionOperands(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  if (x.rank() != 3 || w.rank() != 2 || w.dim(0) != x.dim(2)) {
    ctx.fail("input " + x.describe() + " and weights " + w.describe() +
                 " must be [B, S, Hin] and [Hin, 3 * hidden]",
             ErrorCode::kInvalidArgument);
  }
}

// The attention of the packed projection qkv [B, S, 3 * hidden], the mask index at `maskInput`.
void attendPacked(KernelContext& ctx, const AttentionAttrs& a, const Tensor& qkv, size_t maskInput,
                  size_t biasInput) {
  const AttentionOperands o = packedAttentionOperands(ctx, qkv, a.heads);
  const std::optional<Tensor> mask = attentionMask(ctx, a, maskInput, biasInput, o.B, o.Sq, o.Sq);
  fusedAttention(ctx, o, mask ? &*mask : nullptr, scaleFor(a, o.Dk), ctx.output(0));
}

void runAttention(KernelContext& ctx, const AttentionAttrs& a) {
  checkAttentionOperands(ctx);
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const int64_t B = x.dim(0), S = x.dim(1), Hin = x.dim(2), width = w.dim(1);
  Tensor qkv(DataType::kFloat32, Shape{B, S, width});
  float* p = qkv.data<float>();
  sgemm(false, false, B * S, width, Hin, 1.0f, x.data<float>(), Hin, w.data<float>(), width, 0.0f,
        p, width, ctx.workspace(sgemmWorkspaceBytes(B * S, width, Hin, poolThreads())));
  if (ctx.hasInput(2)) {
    const Tensor& bias = ctx.input(2);
    if (bias.numel() != width) {
      ctx.fail("bias " + bias.describe() + " must hold " + std::to_string(width) + " values",
               ErrorCode::kInvalidArgument);
    }
    for (int64_t r = 0; r < B * S; ++r) {
      for (int64_t j = 0; j < width; ++j) p[r * width + j] += bias.data<float>()[j];
    }
  }
  attendPacked(ctx, a, qkv, 3, 5);
}

// MultiHeadAttention's query (0), key (1) and value (2), [B, length, heads * head size] each, plus
// their slices of the bias (3) when given (copied into `biased` then).
AttentionOperands multiHeadOperands(KernelContext& ctx, const AttentionAttrs& a,
                                    std::vector<Tensor>& biased) {
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  if (q.rank() != 3 || k.rank() != 3 || v.rank() != 3 || k.dim(0) != q.dim(0) ||
      v.dim(0) != q.dim(0) || v.dim(1) != k.dim(1) || k.dim(2) != q.dim(2) ||
      q.dim(2) % a.heads != 0 || v.dim(2) % a.heads != 0) {
    ctx.fail("query " + q.describe() + ", key " + k.describe() + " and value " + v.describe() +
                 " must be [batch, length, num_heads * head size] with one batch, query and key "
                 "widths alike and " +
                 "value and key lengths alike (packed and 4-D forms are not supported)",
             ErrorCode::kUnsupportedNode);
  }
  const Tensor* parts[3] = {&q, &k, &v};
  if (ctx.hasInput(3)) {
    const Tensor& bias = ctx.input(3);
    if (bias.numel() != q.dim(2) + k.dim(2) + v.dim(2)) {
      ctx.fail("bias " + bias.describe() + " must hold the query, key and value widths' values",
               ErrorCode::kInvalidArgument);
    }
    const float* add = bias.data<float>();
    for (const Tensor* t : {&q, &k, &v}) {
      Tensor& b = biased.emplace_back(DataType::kFloat32, t->shape());
      const int64_t width = t->dim(2);
      for (int64_t i = 0; i < t->numel(); ++i)
        b.data<float>()[i] = t->data<float>()[i] + add[i % width];
      add += width;
    }
    for (size_t i = 0; i < 3; ++i) parts[i] = &biased[i];
  }
  AttentionOperands o{parts[0]->data<float>(),
                      parts[1]->data<float>(),
                      parts[2]->data<float>(),
                      q.dim(2),
                      k.dim(2),
                      v.dim(2),
                      q.dim(0),
                      q.dim(1),
                      k.dim(1),
                      a.heads,
                      q.dim(2) / a.heads,
                      v.dim(2) / a.heads};
  return o;
}

void runMultiHeadAttention(KernelContext& ctx, const AttentionAttrs& a) {
  std::vector<Tensor> biased;
  biased.reserve(3);
  const AttentionOperands o = multiHeadOperands(ctx, a, biased);
  const std::optional<Tensor> mask = attentionMask(ctx, a, 4, 5, o.B, o.Sq, o.Sk);
  fusedAttention(ctx, o, mask ? &*mask : nullptr, scaleFor(a, o.Dk), ctx.output(0));
}

AttentionAttrs attentionAttrs(const KernelCreateInfo& info) {
  AttentionAttrs a;
  a.heads = ir::attrInt(info.node, "num_heads");
  a.unidirectional = ir::attrInt(info.node, "unidirectional", 0) != 0;
  a.maskFilter = ir::attrFloat(info.node, "mask_filter_value", -10000.0f);
  a.scale = ir::attrFloat(info.node, "scale", 0.0f);
  return a;
}

// The attention's workspace for a packed projection [B, S, width]; 0 when width does not split
// into the heads.
uint64_t packedAttentionWorkspace(const AttentionAttrs& a, int64_t B, int64_t S, int64_t width,
                                  int threads) {
  if (a.heads <= 0 || width % (3 * a.heads) != 0) return 0;
  const int64_t D = width / (3 * a.heads);
  return fusedAttentionWorkspaceBytes(B, S, S, a.heads, D, D, threads);
}

// Attention: the projection's GEMM, then the attention, one after the other in one workspace.
Kernel makeAttentionKernel(const KernelCreateInfo& info) {
  const AttentionAttrs a = attentionAttrs(info);
  return {[a](KernelContext& ctx) { runAttention(ctx, a); },
          [a](const std::vector<const Shape*>& in, int threads) -> uint64_t {
            if (in.size() < 2 || !in[0] || !in[1] || in[0]->size() != 3 || in[1]->size() != 2)
              return 0;
            const int64_t B = (*in[0])[0], S = (*in[0])[1], Hin = (*in[0])[2];
            const int64_t width = (*in[1])[1];
            return std::max(sgemmWorkspaceBytes(B * S, width, Hin, threads),
                            packedAttentionWorkspace(a, B, S, width, threads));
          },
          {}};
}

// QAttention's projection on MatMulInteger (its integer GEMM for constant weights), in float as
// MatMulIntegerToFloat's output stage, then Attention's.
Kernel makeQAttentionKernel(const KernelCreateInfo& info) {
  const AttentionAttrs a = attentionAttrs(info);
  IntegerStage integer(info, "MatMulInteger", {0, 1, 6, 7});  // input, weight and their zero points
  WorkspaceFn workspace = [a](const std::vector<const Shape*>& in, int threads) -> uint64_t {
    if (in.size() < 2 || !in[0] || !in[1] || in[0]->size() != 3 || in[1]->size() != 2) return 0;
    return packedAttentionWorkspace(a, (*in[0])[0], (*in[0])[1], (*in[1])[1], threads);
  };
  KernelFn run = [a, integer](KernelContext& ctx) {
    checkAttentionOperands(ctx);
    const Tensor& x = ctx.input(0);
    Tensor qkv(DataType::kFloat32, Shape{x.dim(0), x.dim(1), ctx.input(1).dim(1)});
    const float inputScale = static_cast<float>(qlinearParams(ctx, 3, "input_scale", 1)[0]);
    scaleIntegerProduct(ctx, {4, 2}, integer.run(ctx, qkv.shape()), inputScale, qkv);
    attendPacked(ctx, a, qkv, 5, kNoBias);
  };
  return {std::move(run), std::move(workspace), {}};
}

// MultiHeadAttention: query [B, Sq, H * Dk], key [B, Sk, H * Dk], value [B, Sk, H * Dv].
Kernel makeMultiHeadAttentionKernel(const KernelCreateInfo& info) {
  const AttentionAttrs a = attentionAttrs(info);
  return {[a](KernelContext& ctx) { runMultiHeadAttention(ctx, a); },
          [a](const std::vector<const Shape*>& in, int threads) -> uint64_t {
            if (in.size() < 3 || !in[0] || !in[1] || !in[2] || a.heads <= 0) return 0;
            const Shape &q = *in[0], &k = *in[1], &v = *in[2];
            if (q.size() != 3 || k.size() != 3 || v.size() != 3) return 0;
            return fusedAttentionWorkspaceBytes(q[0], q[1], k[1], a.heads, q[2] / a.heads,
                                                v[2] / a.heads, threads);
          },
          {}};
}

const bool kRegistered = [] {
  KernelRegistry& r = KernelRegistry::global();
  r.addGenericKernel("com.microsoft", "Attention", makeAttentionKernel);
  r.addGenericKernel("com.microsoft", "MultiHeadAttention", makeMultiHeadAttentionKernel);
  r.addGenericKernel("com.microsoft", "QAttention", makeQAttentionKernel);
  return true;
}();

}  // namespace

}  // namespace kiln::cpu
