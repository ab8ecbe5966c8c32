// CPU kernel of com.microsoft Attention (ir/ops/contrib_attention.cpp), float32: the Q, K and V
// projections as one GEMM into a packed [B, S, 3 * hidden] buffer, then the fused attention of
// kiln::FusedAttention (fused_attention.h) over it, with mask_index, unidirectional and
// attention_bias turned into one additive mask [B, heads or 1, S, S] as ONNX Runtime applies them.
#include <cmath>
#include <optional>
#include <vector>

#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/kernels/fused_attention.h"

namespace kiln::cpu {
namespace {

struct AttentionAttrs {
  int64_t heads = 0;
  bool unidirectional = false;
  float maskFilter = -10000.0f;
  float scale = 0.0f;  // 0: 1 / sqrt(head size)
};

// Whether key j of batch entry b is masked for query i by mask_index (null: none).
bool maskedByIndex(const Tensor* index, int64_t b, int64_t i, int64_t j, int64_t S) {
  if (!index) return false;
  const int32_t* m = index->data<int32_t>();
  if (index->rank() == 1) return j >= m[b];  // the entry's keys end at m[b]
  if (index->rank() == 2) return m[b * S + j] == 0;
  return m[(b * S + i) * S + j] == 0;
}

// The additive mask [B, Hm, S, S] (Hm: attention_bias's heads, or 1), or nullopt when none applies.
std::optional<Tensor> attentionMask(const KernelContext& ctx, const AttentionAttrs& a, int64_t B, int64_t S) {
  const Tensor* index = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
  const Tensor* bias = ctx.hasInput(5) ? &ctx.input(5) : nullptr;
  if (!index && !bias && !a.unidirectional) return std::nullopt;
  if (index) {
    const Shape& s = index->shape();
    const bool fits = (s.size() == 1 && s[0] == B) || (s.size() == 2 && s == Shape{B, S}) ||
                      (s.size() == 3 && s == Shape{B, S, S});
    if (!fits) {
      ctx.fail("mask_index " + index->describe() + " is not one kiln supports: [batch] key lengths, [batch, " +
                   std::to_string(S) + "] or [batch, " + std::to_string(S) + ", " + std::to_string(S) + "] 0/1 masks",
               ErrorCode::kUnsupportedNode);
    }
  }
  int64_t biasHeads = 1, biasBatch = 1;
  if (bias) {
    const Shape& s = bias->shape();
    if (s.size() != 4 || (s[0] != 1 && s[0] != B) || (s[1] != 1 && s[1] != a.heads) || s[2] != S || s[3] != S) {
      ctx.fail("attention_bias " + bias->describe() + " must be [batch or 1, num_heads or 1, " + std::to_string(S) + ", " +
                   std::to_string(S) + "]",
               ErrorCode::kInvalidArgument);
    }
    biasBatch = s[0];
    biasHeads = s[1];
  }
  Tensor mask(DataType::kFloat32, Shape{B, biasHeads, S, S});
  float* out = mask.data<float>();
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < biasHeads; ++h) {
      for (int64_t i = 0; i < S; ++i) {
        for (int64_t j = 0; j < S; ++j) {
          const bool masked = maskedByIndex(index, b, i, j, S) || (a.unidirectional && j > i);
          float v = masked ? a.maskFilter : 0.0f;
          if (bias) v += bias->data<float>()[(((biasBatch == 1 ? 0 : b) * biasHeads + h) * S + i) * S + j];
          *out++ = v;
        }
      }
    }
  }
  return mask;
}

void runAttention(KernelContext& ctx, const AttentionAttrs& a) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  if (x.rank() != 3 || w.rank() != 2 || w.dim(0) != x.dim(2)) {
    ctx.fail("input " + x.describe() + " and weights " + w.describe() + " must be [B, S, Hin] and [Hin, 3 * hidden]",
             ErrorCode::kInvalidArgument);
  }
  const int64_t B = x.dim(0), S = x.dim(1), Hin = x.dim(2), width = w.dim(1);
  Tensor qkv(DataType::kFloat32, Shape{B, S, width});
  float* p = qkv.data<float>();
  sgemm(false, false, B * S, width, Hin, 1.0f, x.data<float>(), Hin, w.data<float>(), width, 0.0f, p, width);
  if (ctx.hasInput(2)) {
    const Tensor& bias = ctx.input(2);
    if (bias.numel() != width) {
      ctx.fail("bias " + bias.describe() + " must hold " + std::to_string(width) + " values", ErrorCode::kInvalidArgument);
    }
    for (int64_t r = 0; r < B * S; ++r) {
      for (int64_t j = 0; j < width; ++j) p[r * width + j] += bias.data<float>()[j];
    }
  }
  const AttentionOperands o = packedAttentionOperands(ctx, qkv, a.heads);
  const std::optional<Tensor> mask = attentionMask(ctx, a, B, S);
  const float scale = a.scale == 0.0f ? 1.0f / std::sqrt(static_cast<float>(o.Dk)) : a.scale;
  fusedAttention(ctx, o, mask ? &*mask : nullptr, scale, ctx.output(0));
}

KernelFn makeAttentionKernel(const KernelCreateInfo& info) {
  AttentionAttrs a;
  a.heads = ir::attrInt(info.node, "num_heads");
  a.unidirectional = ir::attrInt(info.node, "unidirectional", 0) != 0;
  a.maskFilter = ir::attrFloat(info.node, "mask_filter_value", -10000.0f);
  a.scale = ir::attrFloat(info.node, "scale", 0.0f);
  return [a](KernelContext& ctx) { runAttention(ctx, a); };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "Attention", KernelFactory(makeAttentionKernel));

}  // namespace kiln::cpu
