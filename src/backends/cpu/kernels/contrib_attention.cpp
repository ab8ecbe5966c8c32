// CPU kernels of com.microsoft Attention, QAttention and MultiHeadAttention
// (ir/ops/contrib_attention.cpp), float32, on the fused attention of kiln::FusedAttention
// (fused_attention.h): Attention's Q, K and V projections as one GEMM into a packed [B, S, q + k +
// v hidden] buffer, MultiHeadAttention's projected query, key and value read in place (copied when
// a bias is added). With a KV cache (Attention's past / present [2, B, N, T, H],
// MultiHeadAttention's past_key / past_value and present_key / present_value [B, N, T, H]) the keys
// and values are the past's rows followed by the new ones, written into the present (BNSH) and read
// from there. The mask index, unidirectional and the attention bias become one additive mask [B,
// heads or 1, S, T] as ONNX Runtime applies them.
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <vector>

#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/contrib_attention.h"
#include "backends/cpu/kernels/contrib_quantized_matmul.h"
#include "backends/cpu/kernels/fused_attention.h"

namespace kiln::cpu {
namespace {

constexpr size_t kNoBias = 1000;  // an input index past the node's: no attention bias

// Whether key j (of T) of batch entry b is masked for query i (of S) by a mask index (null: none):
// [B] key lengths, [B, T] or [B, S, T] with 0 where masked.
bool maskedByIndex(const Tensor* index, int64_t b, int64_t i, int64_t j, int64_t S, int64_t T) {
  if (!index) return false;
  const int32_t* m = index->data<int32_t>();
  if (index->rank() == 1) return j >= m[b];
  if (index->rank() == 2) return m[b * T + j] == 0;
  return m[(b * S + i) * T + j] == 0;
}

}  // namespace

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

namespace {

void checkAttentionOperands(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  if (x.rank() != 3 || w.rank() != 2 || w.dim(0) != x.dim(2)) {
    ctx.fail("input " + x.describe() + " and weights " + w.describe() +
                 " must be [B, S, Hin] and [Hin, 3 * hidden]",
             ErrorCode::kInvalidArgument);
  }
}

}  // namespace

// cache [B, N, P + L, D] (BNSH): the P rows of each head of past [B, N, P, D] (null: P = 0), then
// the L new rows of `rows` ([B, L] rows `rowStride` apart, head n at n * D), plus `bias` (null:
// none) of width N * D.
void fillCache(const float* pp, int64_t P, const float* rows, int64_t rowStride, const float* bias,
               int64_t B, int64_t N, int64_t L, int64_t D, float* cache) {
  const int64_t T = P + L;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t n = 0; n < N; ++n) {
      float* head = cache + (b * N + n) * T * D;
      if (pp) std::copy_n(pp + (b * N + n) * P * D, P * D, head);
      for (int64_t l = 0; l < L; ++l) {
        const float* src = rows + (b * L + l) * rowStride + n * D;
        float* dst = head + (P + l) * D;
        for (int64_t d = 0; d < D; ++d) dst[d] = src[d] + (bias ? bias[n * D + d] : 0.0f);
      }
    }
  }
}

// Operands reading K and V from BNSH caches [B, N, T, Dk] and [B, N, T, Dv].
void readCaches(AttentionOperands& o, const float* keys, const float* values, int64_t T) {
  o.k = keys, o.v = values, o.Sk = T;
  o.kRow = o.Dk, o.kHead = T * o.Dk, o.kBatch = o.H * T * o.Dk;
  o.vRow = o.Dv, o.vHead = T * o.Dv, o.vBatch = o.H * T * o.Dv;
}

namespace {

// Attention's sizes of Q, K and V in its projection of width `width`: qkv_hidden_sizes, or thirds.
std::array<int64_t, 3> projectionWidths(const AttentionAttrs& a, int64_t width) {
  if (a.hiddenSizes.size() == 3) return {a.hiddenSizes[0], a.hiddenSizes[1], a.hiddenSizes[2]};
  return {width / 3, width / 3, width / 3};
}

// The attention of the packed projection qkv [B, S, q + k + v hidden], the mask index at
// `maskInput`, the past [2, B, N, P, H] at `pastInput` (past the inputs: none).
void attendPacked(KernelContext& ctx, const AttentionAttrs& a, const Tensor& qkv, size_t maskInput,
                  size_t biasInput, size_t pastInput) {
  const int64_t B = qkv.dim(0), S = qkv.dim(1), W = qkv.dim(2), N = a.heads;
  const auto [qh, kh, vh] = projectionWidths(a, W);
  if (qh + kh + vh != W || qh != kh || qh % N != 0 || vh % N != 0) {
    ctx.fail("the projection " + qkv.describe() + " does not split into Q, K and V of " +
                 std::to_string(qh) + ", " + std::to_string(kh) + " and " + std::to_string(vh) +
                 " (equal Q and K sizes, multiples of num_heads " + std::to_string(N) + ")",
             ErrorCode::kInvalidArgument);
  }
  const float* base = qkv.data<float>();
  AttentionOperands o{base, base + qh, base + qh + kh, W, W, W, B, S, S, N, qh / N, vh / N};
  const Tensor* past = ctx.hasInput(pastInput) ? &ctx.input(pastInput) : nullptr;
  const bool cached = past || ctx.wantsOutput(1);
  Tensor present;
  if (cached) {
    if (o.Dk != o.Dv) {
      ctx.fail("past / present need equal K and V head sizes, got " + std::to_string(o.Dk) +
                   " and " + std::to_string(o.Dv),
               ErrorCode::kInvalidArgument);
    }
    const int64_t P = past && past->rank() == 5 ? past->dim(3) : 0;
    if (past && past->shape() != Shape{2, B, N, P, o.Dk}) {
      ctx.fail("past " + past->describe() + " must be [2, batch " + std::to_string(B) +
                   ", num_heads " + std::to_string(N) + ", past length, head size " +
                   std::to_string(o.Dk) + "]",
               ErrorCode::kInvalidArgument);
    }
    const Shape shape{2, B, N, P + S, o.Dk};
    present = ctx.wantsOutput(1) ? ctx.allocateOutput(1, DataType::kFloat32, shape)
                                 : Tensor(DataType::kFloat32, shape);
    const int64_t half = B * N * (P + S) * o.Dk, pastHalf = B * N * P * o.Dk;
    const float* pp = past ? past->data<float>() : nullptr;
    float* keys = present.data<float>();
    fillCache(pp, P, o.k, W, nullptr, B, N, S, o.Dk, keys);
    fillCache(pp ? pp + pastHalf : nullptr, P, o.v, W, nullptr, B, N, S, o.Dv, keys + half);
    readCaches(o, keys, keys + half, P + S);
  }
  const std::optional<Tensor> mask = attentionMask(ctx, a, maskInput, biasInput, B, S, o.Sk);
  Tensor& y = ctx.allocateOutput(0, DataType::kFloat32, Shape{B, S, vh});
  fusedAttention(ctx, o, mask ? &*mask : nullptr, scaleFor(a, o.Dk), y);
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
  attendPacked(ctx, a, qkv, 3, 5, 4);
}

}  // namespace

// query + its bias slice (`offset` into bias, width q's), or query itself without a bias.
const float* biasedRows(const Tensor& t, const float* bias, int64_t offset,
                        std::vector<Tensor>& owned) {
  if (!bias) return t.data<float>();
  Tensor& b = owned.emplace_back(DataType::kFloat32, t.shape());
  const int64_t width = t.dim(2);
  for (int64_t i = 0; i < t.numel(); ++i)
    b.data<float>()[i] = t.data<float>()[i] + bias[offset + i % width];
  return b.data<float>();
}

void requireLayout(const KernelContext& ctx, const Tensor& t, const Shape& want, const char* name,
                   const char* layout) {
  if (t.shape() != want) {
    ctx.fail(
        std::string(name) + " " + t.describe() + " must be " + layout + " " + shapeToString(want),
        ErrorCode::kInvalidArgument);
  }
}

namespace {

// MultiHeadAttention's operands: query [B, S, N * Dk] (0); key and value [B, L, N * Dk] and
// [B, L, N * Dv] (1, 2) with their bias slices (3), after the past [B, N, P, D] (6, 7) in the
// present caches when there is a past or a present is wanted, or the caches themselves [B, N, L,
// D] (a cross-attention's keys, only the query's bias then). Copies go to `owned`.
AttentionOperands multiHeadOperands(KernelContext& ctx, const AttentionAttrs& a,
                                    std::vector<Tensor>& owned) {
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  const int64_t N = a.heads;
  if (q.rank() != 3 || q.dim(2) % N != 0 || (k.rank() != 3 && k.rank() != 4) ||
      v.rank() != k.rank()) {
    ctx.fail("query " + q.describe() + ", key " + k.describe() + " and value " + v.describe() +
                 " must be [batch, length, num_heads * head size] (key and value 3-D, or 4-D "
                 "[batch, num_heads, length, head size]; the packed forms are not supported, as "
                 "in onnxruntime's CPU kernel)",
             ErrorCode::kInvalidArgument);
  }
  const int64_t B = q.dim(0), S = q.dim(1), Dk = q.dim(2) / N;
  const bool bnsh = k.rank() == 4;
  const int64_t L = bnsh ? k.dim(2) : k.dim(1);
  const int64_t Dv = bnsh ? v.dim(3) : v.dim(2) / N;
  if (bnsh) {
    requireLayout(ctx, k, Shape{B, N, L, Dk}, "key", "[batch, num_heads, length, head size]");
    if (v.rank() != 4 || v.dim(0) != B || v.dim(1) != N || v.dim(2) != L)
      requireLayout(ctx, v, Shape{B, N, L, Dv}, "value", "[batch, num_heads, length, head size]");
  } else {
    requireLayout(ctx, k, Shape{B, L, N * Dk}, "key", "[batch, length, num_heads * head size]");
    if (v.dim(0) != B || v.dim(1) != L || v.dim(2) % N != 0)
      requireLayout(ctx, v, Shape{B, L, N * Dv}, "value", "[batch, length, num_heads * head size]");
  }
  const float* bias = nullptr;
  if (ctx.hasInput(3)) {
    const Tensor& b = ctx.input(3);
    if (b.numel() != N * (2 * Dk + Dv)) {
      ctx.fail("bias " + b.describe() + " must hold the query, key and value widths' values (" +
                   std::to_string(N * (2 * Dk + Dv)) + ")",
               ErrorCode::kInvalidArgument);
    }
    bias = b.data<float>();
  }
  AttentionOperands o{
      biasedRows(q, bias, 0, owned), nullptr, nullptr, N * Dk, 0, 0, B, S, L, N, Dk, Dv};
  const Tensor* pastK = ctx.hasInput(6) ? &ctx.input(6) : nullptr;
  const Tensor* pastV = ctx.hasInput(7) ? &ctx.input(7) : nullptr;
  if (bnsh) {
    if (pastK || pastV)
      ctx.fail("past_key / past_value cannot follow a 4-D key and value (the cache itself)",
               ErrorCode::kInvalidArgument);
    readCaches(o, k.data<float>(), v.data<float>(), L);
    if (ctx.wantsOutput(1)) ctx.setOutput(1, k);
    if (ctx.wantsOutput(2)) ctx.setOutput(2, v);
    return o;
  }
  if (!pastK != !pastV)
    ctx.fail("past_key and past_value must be given together", ErrorCode::kInvalidArgument);
  if (!pastK && !ctx.wantsOutput(1) && !ctx.wantsOutput(2)) {
    o.k = biasedRows(k, bias, N * Dk, owned), o.kRow = N * Dk;
    o.v = biasedRows(v, bias, 2 * N * Dk, owned), o.vRow = N * Dv;
    return o;
  }
  const int64_t P = pastK ? pastK->dim(pastK->rank() < 3 ? 0 : 2) : 0;
  if (pastK) {
    requireLayout(ctx, *pastK, Shape{B, N, P, Dk}, "past_key",
                  "[batch, num_heads, past, head size]");
    requireLayout(ctx, *pastV, Shape{B, N, P, Dv}, "past_value",
                  "[batch, num_heads, past, head size]");
  }
  Tensor* caches[2];
  for (int i = 0; i < 2; ++i) {
    const Shape shape{B, N, P + L, i == 0 ? Dk : Dv};
    caches[i] = ctx.wantsOutput(1 + i) ? &ctx.allocateOutput(1 + i, DataType::kFloat32, shape)
                                       : &owned.emplace_back(DataType::kFloat32, shape);
  }
  fillCache(pastK ? pastK->data<float>() : nullptr, P, k.data<float>(), N * Dk,
            bias ? bias + N * Dk : nullptr, B, N, L, Dk, caches[0]->data<float>());
  fillCache(pastV ? pastV->data<float>() : nullptr, P, v.data<float>(), N * Dv,
            bias ? bias + 2 * N * Dk : nullptr, B, N, L, Dv, caches[1]->data<float>());
  readCaches(o, caches[0]->data<float>(), caches[1]->data<float>(), P + L);
  return o;
}

void runMultiHeadAttention(KernelContext& ctx, const AttentionAttrs& a) {
  std::vector<Tensor> owned;
  owned.reserve(5);  // the operands point into these tensors
  const AttentionOperands o = multiHeadOperands(ctx, a, owned);
  const std::optional<Tensor> mask = attentionMask(ctx, a, 4, 5, o.B, o.Sq, o.Sk);
  AttentionOptions options;
  if (ctx.wantsOutput(3))
    options.qk =
        ctx.allocateOutput(3, DataType::kFloat32, Shape{o.B, o.H, o.Sq, o.Sk}).data<float>();
  Tensor& y = ctx.allocateOutput(0, DataType::kFloat32, Shape{o.B, o.Sq, o.H * o.Dv});
  fusedAttention(ctx, o, mask ? &*mask : nullptr, scaleFor(a, o.Dk), y, options);
}

}  // namespace

AttentionAttrs attentionAttrs(const KernelCreateInfo& info) {
  AttentionAttrs a;
  a.heads = ir::attrInt(info.node, "num_heads");
  a.unidirectional = ir::attrInt(info.node, "unidirectional", 0) != 0;
  a.maskFilter = ir::attrFloat(info.node, "mask_filter_value", -10000.0f);
  a.scale = ir::attrFloat(info.node, "scale", 0.0f);
  if (ir::hasAttr(info.node, "qkv_hidden_sizes"))
    a.hiddenSizes = ir::attrInts(info.node, "qkv_hidden_sizes");
  return a;
}

namespace {

// The attention's workspace for a packed projection [B, S, width] after a past [2, B, N, P, H]
// (null: none); 0 when width does not split into the heads.
uint64_t packedAttentionWorkspace(const AttentionAttrs& a, int64_t B, int64_t S, int64_t width,
                                  const Shape* past, int threads) {
  const auto [qh, kh, vh] = projectionWidths(a, width);
  if (a.heads <= 0 || qh % a.heads != 0 || vh % a.heads != 0 || qh + kh + vh != width) return 0;
  const int64_t P = past && past->size() == 5 ? (*past)[3] : 0;
  return fusedAttentionWorkspaceBytes(B, S, P + S, a.heads, qh / a.heads, vh / a.heads, threads);
}

const Shape* shapeAt(const std::vector<const Shape*>& in, size_t i) {
  return i < in.size() ? in[i] : nullptr;
}

// Attention: the projection's GEMM, then the attention, one after the other in one workspace.
Kernel makeAttentionKernel(const KernelCreateInfo& info) {
  const AttentionAttrs a = attentionAttrs(info);
  return {[a](KernelContext& ctx) {
            runAttentionInFloat(ctx, [&a](KernelContext& c) { runAttention(c, a); });
          },
          [a](const std::vector<const Shape*>& in, int threads) -> uint64_t {
            if (in.size() < 2 || !in[0] || !in[1] || in[0]->size() != 3 || in[1]->size() != 2)
              return 0;
            const int64_t B = (*in[0])[0], S = (*in[0])[1], Hin = (*in[0])[2];
            const int64_t width = (*in[1])[1];
            return std::max(sgemmWorkspaceBytes(B * S, width, Hin, threads),
                            packedAttentionWorkspace(a, B, S, width, shapeAt(in, 4), threads));
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
    return packedAttentionWorkspace(a, (*in[0])[0], (*in[0])[1], (*in[1])[1], nullptr, threads);
  };
  KernelFn run = [a, integer](KernelContext& ctx) {
    checkAttentionOperands(ctx);
    const Tensor& x = ctx.input(0);
    Tensor qkv(DataType::kFloat32, Shape{x.dim(0), x.dim(1), ctx.input(1).dim(1)});
    const float inputScale = static_cast<float>(qlinearParams(ctx, 3, "input_scale", 1)[0]);
    scaleIntegerProduct(ctx, {4, 2}, integer.run(ctx, qkv.shape()), inputScale, qkv);
    attendPacked(ctx, a, qkv, 5, kNoBias, 8);
  };
  return {std::move(run), std::move(workspace), {}};
}

// MultiHeadAttention: query [B, Sq, H * Dk], key [B, Sk, H * Dk] and value [B, Sk, H * Dv] after
// a past [B, H, P, D], or key and value [B, H, Sk, D].
Kernel makeMultiHeadAttentionKernel(const KernelCreateInfo& info) {
  const AttentionAttrs a = attentionAttrs(info);
  return {[a](KernelContext& ctx) {
            runAttentionInFloat(ctx, [&a](KernelContext& c) { runMultiHeadAttention(c, a); });
          },
          [a](const std::vector<const Shape*>& in, int threads) -> uint64_t {
            if (in.size() < 3 || !in[0] || !in[1] || !in[2] || a.heads <= 0) return 0;
            const Shape &q = *in[0], &k = *in[1], &v = *in[2];
            const bool bnsh = k.size() == 4 && v.size() == 4;
            if (q.size() != 3 || (!bnsh && (k.size() != 3 || v.size() != 3))) return 0;
            const Shape* past = shapeAt(in, 6);
            const int64_t P = !bnsh && past && past->size() == 4 ? (*past)[2] : 0;
            return fusedAttentionWorkspaceBytes(q[0], q[1], P + (bnsh ? k[2] : k[1]), a.heads,
                                                q[2] / a.heads, bnsh ? v[3] : v[2] / a.heads,
                                                threads);
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
