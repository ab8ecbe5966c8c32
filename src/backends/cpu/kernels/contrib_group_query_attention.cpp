// CPU kernels of com.microsoft GroupQueryAttention and SparseAttention
// (ir/ops/contrib_group_query_attention.cpp),
// float32, as onnxruntime's CPU kernel computes it, on the fused attention of kiln::FusedAttention
// (fused_attention.h) and the rotation of RotaryEmbedding (rotary_embedding.h):
// - the step: the first prompt when S equals total_sequence_length T (past lengths 0), else each
//   batch entry b has total length seqlens_k[b] + 1 of which the last S are new (one token, or a
//   later chunk of a prompt with batch 1);
// - with do_rotary, the new Q and K rows are rotated at their positions (position_ids, else s in
//   the first prompt and past + s after it; in the first prompt position_ids' first value + s);
// - present [B, Nkv, max(T, P), H] holds each entry's past rows, then the new ones, then zeros;
// - query row s of entry b sees the keys [L - local_window_size, L) (from 0 without a window), L
//   = min(past + s + 1, total length) (the total length when not causal); scores are scale * Q K^T,
//   softcapped, plus attention_bias, then softmax (smooth: one more logit, head_sink's or 0).
// Query head h reads K / V head h / (num_heads / kv_num_heads). SparseAttention is the same
// attention on a shared past / present buffer with its keys limited to blocks (sparseBlockMask).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/fused_attention.h"
#include "backends/cpu/kernels/rotary_embedding.h"

namespace kiln::cpu {
namespace {

struct GqaAttrs {
  int64_t heads = 0, kvHeads = 0;
  float scale = 0.0f, softcap = 0.0f;
  bool rotary = false, interleaved = false, smooth = false, causal = true;
  int64_t window = -1, qkOutput = 0;
};

GqaAttrs gqaAttrs(const ir::Node& node) {
  GqaAttrs a;
  a.heads = ir::attrInt(node, "num_heads", 0);
  a.kvHeads = ir::attrInt(node, "kv_num_heads", 0);
  a.scale = ir::attrFloat(node, "scale", 0.0f);
  a.softcap = ir::attrFloat(node, "softcap", 0.0f);
  a.rotary = ir::attrInt(node, "do_rotary", 0) != 0;
  a.interleaved = ir::attrInt(node, "rotary_interleaved", 0) != 0;
  a.smooth = ir::attrInt(node, "smooth_softmax", 0) != 0;
  a.causal = ir::attrInt(node, "causal", 1) != 0;
  a.window = ir::attrInt(node, "local_window_size", -1);
  a.qkOutput = ir::attrInt(node, "qk_output", 0);
  return a;
}

// The sizes of one call and the rows of the new Q, K and V ([B, S] rows, heads side by side).
struct GqaStep {
  int64_t B = 0, S = 0, H = 0, P = 0, T = 0, present = 0;
  bool firstPrompt = false;
  std::vector<int64_t> past, total;  // per batch entry: rows kept from the past, keys in all
  const float *q = nullptr, *k = nullptr, *v = nullptr;
  int64_t qRow = 0, kvRow = 0;
};

// Where GroupQueryAttention's and SparseAttention's inputs are; lengths: the per-entry key counts
// (GroupQueryAttention's seqlens_k, one less; SparseAttention's key_total_sequence_lengths).
// sharedBuffer: the present is the past buffer updated in place (SparseAttention's, whose rows past
// the new ones keep the past's values), not a new buffer of the kept rows (zeros after them).
struct GqaInputs {
  size_t past, lengths, total, cos, positionIds;
  bool lengthsAreTotals, sharedBuffer;
  const char* lengthsName;
};
constexpr GqaInputs kGqaInputs{3, 5, 6, 7, 9, false, false, "seqlens_k"};
constexpr GqaInputs kSparseInputs{3, 8, 7, 9, 1000, true, true, "key_total_sequence_lengths"};

void requireShape(const KernelContext& ctx, const Tensor& t, const Shape& want, const char* name) {
  if (t.shape() != want) {
    ctx.fail(std::string(name) + " " + t.describe() + " must be " + shapeToString(want),
             ErrorCode::kInvalidArgument);
  }
}

GqaStep gqaStep(const KernelContext& ctx, const GqaAttrs& a, const GqaInputs& in) {
  const Tensor& query = ctx.input(0);
  const int64_t N = a.heads, Nkv = a.kvHeads;
  const bool packed = !ctx.hasInput(1);
  const int64_t parts = packed ? N + 2 * Nkv : N;
  if (query.rank() != 3 || query.dim(2) % parts != 0 || query.dim(2) == 0) {
    ctx.fail("query " + query.describe() + " must be [batch, sequence, " +
                 (packed ? "(num_heads + 2 * kv_num_heads)" : "num_heads") + " * head size]",
             ErrorCode::kInvalidArgument);
  }
  GqaStep st;
  st.B = query.dim(0), st.S = query.dim(1), st.H = query.dim(2) / parts;
  const int64_t H = st.H;
  st.q = query.data<float>();
  if (packed) {
    st.k = st.q + N * H, st.v = st.q + (N + Nkv) * H;
    st.qRow = st.kvRow = parts * H;
  } else {
    requireShape(ctx, ctx.input(1), Shape{st.B, st.S, Nkv * H}, "key");
    requireShape(ctx, ctx.input(2), Shape{st.B, st.S, Nkv * H}, "value");
    st.k = ctx.input(1).data<float>(), st.v = ctx.input(2).data<float>();
    st.qRow = N * H, st.kvRow = Nkv * H;
  }
  const bool hasPast = ctx.hasInput(in.past);
  if (hasPast) {
    const Tensor& pastKey = ctx.input(in.past);
    st.P = pastKey.rank() == 4 ? pastKey.dim(2) : 0;
    requireShape(ctx, pastKey, Shape{st.B, Nkv, st.P, H}, "past_key");
    requireShape(ctx, ctx.input(in.past + 1), Shape{st.B, Nkv, st.P, H}, "past_value");
  }
  const Tensor& seqlens = ctx.input(in.lengths);
  const Tensor& totalT = ctx.input(in.total);
  if (seqlens.numel() != st.B || totalT.numel() != 1) {
    ctx.fail(std::string(in.lengthsName) + " " + seqlens.describe() +
                 " must hold one length per batch entry (" + std::to_string(st.B) +
                 ") and total_sequence_length " + totalT.describe() + " one value",
             ErrorCode::kInvalidArgument);
  }
  st.T = totalT.intAt(0);
  st.present = std::max(st.T, st.P);
  st.firstPrompt = st.S == st.T;
  if (!st.firstPrompt && st.S > 1 && st.B != 1) {
    ctx.fail("a query of " + std::to_string(st.S) + " tokens that is not the first prompt (" +
                 "total_sequence_length " + std::to_string(st.T) + ") needs batch 1",
             ErrorCode::kInvalidArgument);
  }
  st.past.resize(st.B), st.total.resize(st.B);
  for (int64_t b = 0; b < st.B; ++b) {
    const int64_t total = seqlens.intAt(b) + (in.lengthsAreTotals ? 0 : 1);
    const int64_t past = st.firstPrompt ? 0 : total - st.S;
    const bool fits = total >= 1 && total <= st.T && past >= 0 && (hasPast || past == 0) &&
                      past <= st.P && past + st.S <= st.present;
    if (!fits) {
      ctx.fail(std::string(in.lengthsName) + "[" + std::to_string(b) + "] = " +
                   std::to_string(seqlens.intAt(b)) + " does not fit the step: total length " +
                   std::to_string(total) + " must be 1.." + std::to_string(st.T) +
                   " (total_sequence_length), with " + std::to_string(st.S) +
                   " new tokens after at most the past's " + std::to_string(st.P) + " rows",
               ErrorCode::kInvalidArgument);
    }
    st.past[b] = past, st.total[b] = total;
  }
  return st;
}

// The new rows of Q (N heads) and K (Nkv heads) rotated at their positions into qOut / kOut
// ([B, S] rows of the heads side by side).
void rotateNewRows(const KernelContext& ctx, const GqaAttrs& a, const GqaInputs& in,
                   const GqaStep& st, float* qOut, float* kOut) {
  const Tensor& cosCache = ctx.input(in.cos);
  const Tensor& sinCache = ctx.input(in.cos + 1);
  const int64_t H = st.H;
  if (cosCache.rank() != 2 || cosCache.shape() != sinCache.shape() || cosCache.dim(1) == 0 ||
      2 * cosCache.dim(1) > H) {
    ctx.fail("cos_cache " + cosCache.describe() + " and sin_cache " + sinCache.describe() +
                 " must be [max positions, rotary dim / 2] alike, rotary dim at most the head "
                 "size " +
                 std::to_string(H),
             ErrorCode::kInvalidArgument);
  }
  const int64_t half = cosCache.dim(1), rows = cosCache.dim(0);
  const Tensor* ids = ctx.hasInput(in.positionIds) ? &ctx.input(in.positionIds) : nullptr;
  if (ids && ids->numel() != st.B * st.S) {
    ctx.fail("position_ids " + ids->describe() + " must be [batch, sequence]",
             ErrorCode::kInvalidArgument);
  }
  for (int64_t b = 0; b < st.B; ++b) {
    for (int64_t s = 0; s < st.S; ++s) {
      int64_t pos = st.firstPrompt ? s : st.past[b] + s;
      if (ids) {  // a first prompt counts on from its first id (checked before adding: any int64)
        const int64_t id = ids->intAt(st.firstPrompt ? 0 : b * st.S + s);
        pos = id < 0 || id >= rows ? id : id + (st.firstPrompt ? s : 0);
      }
      if (pos < 0 || pos >= rows) {
        ctx.fail("position " + std::to_string(pos) + " of token " + std::to_string(s) +
                     " of batch entry " + std::to_string(b) + " is outside cos_cache " +
                     cosCache.describe(),
                 ErrorCode::kInvalidArgument);
      }
      const float* c = cosCache.data<float>() + pos * half;
      const float* sn = sinCache.data<float>() + pos * half;
      const int64_t row = b * st.S + s;
      for (int64_t h = 0; h < a.heads; ++h) {
        float* dst = qOut + (row * a.heads + h) * H;
        std::copy_n(st.q + row * st.qRow + h * H, H, dst);
        rotateHead(dst, dst, half, a.interleaved, c, sn);
      }
      for (int64_t h = 0; h < a.kvHeads; ++h) {
        float* dst = kOut + (row * a.kvHeads + h) * H;
        std::copy_n(st.k + row * st.kvRow + h * H, H, dst);
        rotateHead(dst, dst, half, a.interleaved, c, sn);
      }
    }
  }
}

// present [B, Nkv, present, H]: the past's first st.past[b] rows (all of them when `whole`), zeros
// after them, then the S new rows (rowStride apart) from row st.past[b].
void fillPresent(const GqaStep& st, int64_t Nkv, const float* past, bool whole, const float* rows,
                 int64_t rowStride, float* present) {
  const int64_t H = st.H;
  std::fill_n(present, st.B * Nkv * st.present * H, 0.0f);
  for (int64_t b = 0; b < st.B; ++b) {
    for (int64_t n = 0; n < Nkv; ++n) {
      float* head = present + (b * Nkv + n) * st.present * H;
      if (past) std::copy_n(past + (b * Nkv + n) * st.P * H, (whole ? st.P : st.past[b]) * H, head);
      for (int64_t s = 0; s < st.S; ++s)
        std::copy_n(rows + (b * st.S + s) * rowStride + n * H, H, head + (st.past[b] + s) * H);
    }
  }
}

// One call's new rows (rotated when do_rotary) and its present caches, and the operands that
// read them: query heads [B, S] rows apart, keys and values from the present (BNSH).
struct GqaAttention {
  GqaStep st;
  std::vector<float> rotatedQ, rotatedK;
  Tensor owned[2];
  Tensor* present[2] = {nullptr, nullptr};
  AttentionOperands o;
};

void prepareGqa(KernelContext& ctx, const GqaAttrs& a, const GqaInputs& in, GqaAttention& g) {
  GqaStep& st = g.st;
  st = gqaStep(ctx, a, in);
  const int64_t B = st.B, S = st.S, H = st.H, N = a.heads, Nkv = a.kvHeads;
  if (a.rotary) {
    g.rotatedQ.resize(B * S * N * H), g.rotatedK.resize(B * S * Nkv * H);
    rotateNewRows(ctx, a, in, st, g.rotatedQ.data(), g.rotatedK.data());
    st.q = g.rotatedQ.data(), st.qRow = N * H;
  }
  const float* kRows = a.rotary ? g.rotatedK.data() : st.k;
  const int64_t kRowStride = a.rotary ? Nkv * H : st.kvRow;
  for (int i = 0; i < 2; ++i) {
    const Shape shape{B, Nkv, st.present, H};
    g.present[i] = ctx.wantsOutput(1 + i) ? &ctx.allocateOutput(1 + i, DataType::kFloat32, shape)
                                          : &(g.owned[i] = Tensor(DataType::kFloat32, shape));
  }
  const bool hasPast = ctx.hasInput(in.past);
  fillPresent(st, Nkv, hasPast ? ctx.input(in.past).data<float>() : nullptr, in.sharedBuffer, kRows,
              kRowStride, g.present[0]->data<float>());
  fillPresent(st, Nkv, hasPast ? ctx.input(in.past + 1).data<float>() : nullptr, in.sharedBuffer,
              st.v, st.kvRow, g.present[1]->data<float>());
  AttentionOperands& o = g.o;
  o = AttentionOperands{st.q,
                        g.present[0]->data<float>(),
                        g.present[1]->data<float>(),
                        st.qRow,
                        H,
                        H,
                        B,
                        S,
                        st.T,
                        N,
                        H,
                        H};
  o.qBatch = S * st.qRow, o.qHead = H;
  o.kBatch = o.vBatch = Nkv * st.present * H, o.kHead = o.vHead = st.present * H;
  o.kvGroup = N / Nkv;
}

float gqaScale(const GqaAttrs& a, int64_t H) {
  return a.scale == 0.0f ? 1.0f / std::sqrt(static_cast<float>(H)) : a.scale;
}

void runGroupQueryAttention(KernelContext& ctx, const GqaAttrs& a) {
  GqaAttention g;
  prepareGqa(ctx, a, kGqaInputs, g);
  const GqaStep& st = g.st;
  const int64_t B = st.B, S = st.S, H = st.H, N = a.heads;
  std::vector<int64_t> keyBegin(B * S), keyEnd(B * S);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < S; ++s) {
      const int64_t end = a.causal ? std::min(st.past[b] + s + 1, st.total[b]) : st.total[b];
      keyEnd[b * S + s] = end;
      keyBegin[b * S + s] = a.window >= 0 && end > a.window ? end - a.window : 0;
    }
  }
  AttentionOptions options;
  options.softcap = a.softcap;
  options.smoothSoftmax = a.smooth || ctx.hasInput(11);
  if (ctx.hasInput(11)) {
    const Tensor& sinks = ctx.input(11);
    if (sinks.numel() != N)
      ctx.fail("head_sink " + sinks.describe() + " must hold one value per head (" +
                   std::to_string(N) + ")",
               ErrorCode::kInvalidArgument);
    options.sinks = sinks.data<float>();
  }
  options.keyBegin = keyBegin.data(), options.keyEnd = keyEnd.data();
  if (ctx.wantsOutput(3)) {
    options.qk = ctx.allocateOutput(3, DataType::kFloat32, Shape{B, N, S, st.T}).data<float>();
    options.qkAfterSoftmax = a.qkOutput == 2;
  }
  const Tensor* bias = ctx.hasInput(10) ? &ctx.input(10) : nullptr;
  Tensor& y = ctx.allocateOutput(0, DataType::kFloat32, Shape{B, S, N * H});
  fusedAttention(ctx, g.o, bias, gqaScale(a, H), y, options);
}

// SparseAttention's additive mask [B, N, S, T]: 0 for the keys of the blocks that block_col_indices
// lists in the query's block row of its head's layout (head h: layout h % layouts), the lowest
// float elsewhere; a layout or block row with every block up to the diagonal masks nothing.
Tensor sparseBlockMask(const KernelContext& ctx, const GqaStep& st, int64_t N, int64_t block) {
  const Tensor& rows = ctx.input(5);
  const Tensor& cols = ctx.input(6);
  if (rows.rank() != 2 || rows.dim(1) < 2 || rows.dim(0) == 0 || N % rows.dim(0) != 0 ||
      cols.rank() != 2 || cols.dim(0) != rows.dim(0)) {
    ctx.fail(
        "block_row_indices " + rows.describe() + " and block_col_indices " + cols.describe() +
            " must be [layouts, max blocks + 1] and [layouts, max nonzero blocks], num_heads " +
            std::to_string(N) + " a multiple of the layouts",
        ErrorCode::kInvalidArgument);
  }
  const int64_t layouts = rows.dim(0), stride = rows.dim(1), nnz = cols.dim(1),
                maxBlocks = stride - 1;
  if (maxBlocks * block < st.T) {
    ctx.fail("block_row_indices " + rows.describe() + " covers " +
                 std::to_string(maxBlocks * block) +
                 " positions, fewer than total_sequence_length " + std::to_string(st.T),
             ErrorCode::kInvalidArgument);
  }
  const int32_t* pr = rows.data<int32_t>();
  const int32_t* pc = cols.data<int32_t>();
  for (int64_t l = 0; l < layouts; ++l) {
    for (int64_t r = 0; r < stride; ++r) {
      const int32_t at = pr[l * stride + r];
      if (at < 0 || at > nnz || (r > 0 && at < pr[l * stride + r - 1]))
        ctx.fail("block_row_indices of layout " + std::to_string(l) +
                     " must rise from 0 to at most " + std::to_string(nnz),
                 ErrorCode::kInvalidArgument);
    }
  }
  for (int64_t i = 0; i < layouts * nnz; ++i) {
    if (pc[i] < 0 || pc[i] >= maxBlocks)
      ctx.fail("block_col_indices holds block " + std::to_string(pc[i]) + " of " +
                   std::to_string(maxBlocks),
               ErrorCode::kInvalidArgument);
  }
  const int64_t B = st.B, S = st.S, T = st.T;
  Tensor mask(DataType::kFloat32, Shape{B, N, S, T});  // zeros: every key visible
  float* pm = mask.data<float>();
  for (int64_t l = 0; l < layouts; ++l) {
    const int32_t* row = pr + l * stride;
    if (row[stride - 1] >= stride * (stride - 1) / 2) continue;  // a dense layout
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t s = 0; s < S; ++s) {
        const int64_t position = st.past[b] + s, r = position / block;
        if (r >= maxBlocks || row[r + 1] - row[r] == r + 1) continue;  // a dense block row
        std::vector<bool> visible(static_cast<size_t>(maxBlocks), false);
        for (int32_t j = row[r]; j < row[r + 1]; ++j) visible[pc[l * nnz + j]] = true;
        for (int64_t h = l; h < N; h += layouts) {
          float* m = pm + ((b * N + h) * S + s) * T;
          for (int64_t t = 0; t < T; ++t) {
            if (!visible[t / block]) m[t] = std::numeric_limits<float>::lowest();
          }
        }
      }
    }
  }
  return mask;
}

// SparseAttention: GroupQueryAttention's causal attention over the shared past / present buffer
// (key_total_sequence_lengths counts each entry's keys), each query's keys limited to its head
// layout's blocks.
void runSparseAttention(KernelContext& ctx, const GqaAttrs& a, int64_t block) {
  if (!ctx.hasInput(3) || !ctx.hasInput(4))
    ctx.fail("past_key and past_value (the shared KV buffer) must be given",
             ErrorCode::kInvalidArgument);
  GqaAttention g;
  prepareGqa(ctx, a, kSparseInputs, g);
  const GqaStep& st = g.st;
  const int64_t B = st.B, S = st.S, H = st.H, N = a.heads;
  if (st.T > st.P) {
    ctx.fail("total_sequence_length " + std::to_string(st.T) + " is past the KV buffer's " +
                 std::to_string(st.P) + " rows",
             ErrorCode::kInvalidArgument);
  }
  std::vector<int64_t> keyEnd(B * S);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) keyEnd[b * S + s] = std::min(st.past[b] + s + 1, st.total[b]);
  AttentionOptions options;
  options.keyEnd = keyEnd.data();
  const Tensor mask = sparseBlockMask(ctx, st, N, block);
  Tensor& y = ctx.allocateOutput(0, DataType::kFloat32, Shape{B, S, N * H});
  fusedAttention(ctx, g.o, &mask, gqaScale(a, H), y, options);
}

Kernel makeSparseAttentionKernel(const KernelCreateInfo& info) {
  const GqaAttrs a = gqaAttrs(info.node);
  const int64_t block = ir::attrInt(info.node, "sparse_block_size", 0);
  return {[a, block](KernelContext& ctx) {
            runAttentionInFloat(ctx, [&](KernelContext& c) { runSparseAttention(c, a, block); });
          },
          [a](const std::vector<const Shape*>& in, int threads) -> uint64_t {
            if (in.size() < 4 || !in[0] || !in[3] || in[0]->size() != 3 || in[3]->size() != 4 ||
                a.heads <= 0 || a.kvHeads <= 0)
              return 0;
            const Shape& q = *in[0];
            const int64_t parts = in[1] ? a.heads : a.heads + 2 * a.kvHeads;
            const int64_t H = q[2] / parts;
            return fusedAttentionWorkspaceBytes(q[0], q[1], (*in[3])[2], a.heads, H, H, threads);
          },
          {}};
}

Kernel makeGroupQueryAttentionKernel(const KernelCreateInfo& info) {
  const GqaAttrs a = gqaAttrs(info.node);
  return {[a](KernelContext& ctx) {
            runAttentionInFloat(ctx, [&a](KernelContext& c) { runGroupQueryAttention(c, a); });
          },
          [a](const std::vector<const Shape*>& in, int threads) -> uint64_t {
            // Sized for keys as many as the past's rows plus the new ones; a larger
            // total_sequence_length takes a heap buffer (KernelContext::workspace).
            if (in.empty() || !in[0] || in[0]->size() != 3 || a.heads <= 0 || a.kvHeads <= 0)
              return 0;
            const Shape& q = *in[0];
            const int64_t parts = in.size() > 1 && in[1] ? a.heads : a.heads + 2 * a.kvHeads;
            const int64_t H = q[2] / parts;
            const int64_t P = in.size() > 3 && in[3] && in[3]->size() == 4 ? (*in[3])[2] : 0;
            return fusedAttentionWorkspaceBytes(q[0], q[1], P + q[1], a.heads, H, H, threads);
          },
          {}};
}

const bool kRegistered = [] {
  KernelRegistry::global().addGenericKernel("com.microsoft", "GroupQueryAttention",
                                            makeGroupQueryAttentionKernel);
  KernelRegistry::global().addGenericKernel("com.microsoft", "SparseAttention",
                                            makeSparseAttentionKernel);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
