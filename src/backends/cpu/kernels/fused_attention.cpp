// kiln::FusedAttention (made by src/opt/fuse_attention.cpp): Y = softmax(scale * Q K^T + mask) V
// for each batch and head, with Q [B, Sq, H, Dk], K [B, Sk, H, Dk], V [B, Sk, H, Dv] and Y
// [B, Sq, H, Dv], or Q, K and V side by side in one [B, S, 3 * H * D] input (the packed form, made
// when their projections are one GEMM). Heads are read in place through row strides (no
// transposes); a block of query rows has its scores, mask, softmax and product with V done while
// the scores are in cache, and the (batch, head, row block) tasks run in parallel on the pool.
#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include "backends/cpu/kernels/fused_attention.h"

#include "backends/cpu/gemm/float_copy.h"
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/softmax_exp.h"
#include "backends/cpu/thread_pool.h"
#include "core/aligned_memory.h"

namespace kiln::cpu {
namespace {

// Query rows per task: the block's scores (kRowBlock x Sk floats) stay in L1/L2 between the two
// products, and B * H * blocks tasks keep two threads busy even for one sequence.
constexpr int64_t kRowBlock = 64;

/// The mask's element strides along (batch, head, query, key) when it broadcasts (right-aligned)
/// to `full`, 0 where it repeats; false when it does not broadcast.
bool maskStrides(const Shape& mask, const std::array<int64_t, 4>& full,
                 std::array<int64_t, 4>* strides) {
  if (mask.size() > 4) return false;
  strides->fill(0);
  int64_t stride = 1;
  for (size_t i = 0; i < mask.size(); ++i) {
    const int64_t dim = mask[mask.size() - 1 - i];
    const size_t axis = 3 - i;
    if (dim != 1 && dim != full[axis]) return false;
    (*strides)[axis] = dim == 1 ? 0 : stride;
    stride *= dim;
  }
  return true;
}

AttentionOperands separateOperands(KernelContext& ctx) {
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  for (const Tensor* t : {&q, &k, &v}) {
    if (t->dtype() != DataType::kFloat32) {
      ctx.fail("FusedAttention needs float32 inputs, got " + t->describe(),
               ErrorCode::kInvalidArgument);
    }
  }
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4 || k.dim(0) != q.dim(0) ||
      v.dim(0) != q.dim(0) || k.dim(2) != q.dim(2) || v.dim(2) != q.dim(2) ||
      k.dim(3) != q.dim(3) || v.dim(1) != k.dim(1)) {
    ctx.fail("Q " + q.describe() + ", K " + k.describe() + " and V " + v.describe() +
                 " must be [batch, length, heads, dim] with matching batch, heads, key length and "
                 "Q/K dim",
             ErrorCode::kInvalidArgument);
  }
  AttentionOperands o{
      q.data<float>(), k.data<float>(), v.data<float>(), 0,        0,        0,
      q.dim(0),        q.dim(1),        k.dim(1),        q.dim(2), q.dim(3), v.dim(3)};
  o.qRow = o.H * o.Dk;
  o.kRow = o.H * o.Dk;
  o.vRow = o.H * o.Dv;
  return o;
}

}  // namespace

AttentionOperands packedAttentionOperands(const KernelContext& ctx, const Tensor& qkv,
                                          int64_t heads) {
  if (qkv.dtype() != DataType::kFloat32 || qkv.rank() != 3 || heads <= 0 ||
      qkv.dim(2) % (3 * heads) != 0) {
    ctx.fail("packed QKV " + qkv.describe() + " must be float32 [batch, length, 3 * " +
                 std::to_string(heads) + " * dim]",
             ErrorCode::kInvalidArgument);
  }
  const int64_t D = qkv.dim(2) / (3 * heads);
  const float* base = qkv.data<float>();
  return {base,       base + heads * D, base + 2 * heads * D, qkv.dim(2), qkv.dim(2), qkv.dim(2),
          qkv.dim(0), qkv.dim(1),       qkv.dim(1),           heads,      D,          D};
}

namespace {

// One thread's scratch: a row block's scores, a mask row, then the products' packing (each
// product runs serially, on the thread of its task).
struct AttentionScratch {
  uint64_t scoresBytes, maskRowBytes, gemmBytes;
  uint64_t total() const { return scoresBytes + maskRowBytes + gemmBytes; }
};

AttentionScratch attentionScratch(int64_t Sq, int64_t Sk, int64_t Dk, int64_t Dv) {
  const int64_t rows = std::min(kRowBlock, Sq), lastRows = Sq % kRowBlock;
  uint64_t gemm = 0;
  for (int64_t r : {rows, lastRows}) {
    gemm = std::max({gemm, sgemmWorkspaceBytes(r, Sk, Dk, 1), sgemmWorkspaceBytes(r, Dv, Sk, 1)});
  }
  // Score rows are Sk + 1 floats apart: room for a smooth softmax's sink logit.
  return {cacheLineBytes(static_cast<uint64_t>(rows * (Sk + 1)) * sizeof(float)),
          cacheLineBytes(static_cast<uint64_t>(Sk) * sizeof(float)), gemm};
}

int64_t attentionTasks(int64_t B, int64_t Sq, int64_t H) {
  return B * H * ((Sq + kRowBlock - 1) / kRowBlock);
}

}  // namespace

uint64_t fusedAttentionWorkspaceBytes(int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t Dk,
                                      int64_t Dv, int threads) {
  const int64_t tasks = attentionTasks(B, Sq, H);
  if (tasks <= 0 || Sk <= 0) return 0;
  const int64_t parts = std::min<int64_t>(std::max(threads, 1), tasks);
  return static_cast<uint64_t>(parts) * attentionScratch(Sq, Sk, Dk, Dv).total();
}

namespace {

// The visible keys [begin, end) of query row i of batch entry b, within [0, Sk).
std::pair<int64_t, int64_t> keyRange(const AttentionOptions& op, int64_t b, int64_t i, int64_t Sq,
                                     int64_t Sk) {
  if (!op.keyEnd) return {0, Sk};
  const int64_t end = std::clamp<int64_t>(op.keyEnd[b * Sq + i], 0, Sk);
  const int64_t begin = op.keyBegin ? std::clamp<int64_t>(op.keyBegin[b * Sq + i], 0, end) : 0;
  return {begin, end};
}

void writeQk(float* qkRow, const float* row, int64_t begin, int64_t end, int64_t Sk) {
  for (int64_t j = 0; j < Sk; ++j) qkRow[j] = j >= begin && j < end ? row[j] : 0.0f;
}

// One row of scores (`width` computed, room for width + 1) made probabilities over its keys
// [begin, end): softcap, mask (maskRow, null: none), then softmax, with the sink as one more logit
// at `end` when given; 0 elsewhere. qkRow (null: none) gets the row as the options say.
void rowProbabilities(float* row, const float* maskRow, int64_t begin, int64_t end, int64_t width,
                      const AttentionOptions& op, const float* sink, float* qkRow, int64_t Sk) {
  if (op.softcap > 0) {
    for (int64_t j = begin; j < end; ++j) row[j] = op.softcap * std::tanh(row[j] / op.softcap);
  }
  if (maskRow && (sink || (qkRow && !op.qkAfterSoftmax))) {
    for (int64_t j = begin; j < end; ++j) row[j] += maskRow[j];
    maskRow = nullptr;
  }
  if (qkRow && !op.qkAfterSoftmax) writeQk(qkRow, row, begin, end, Sk);
  if (end > begin) {
    if (sink) {
      row[end] = *sink;
      softmaxRows(row + begin, 0, nullptr, 0, 1, end - begin + 1);
    } else {
      softmaxRows(row + begin, 0, maskRow ? maskRow + begin : nullptr, 0, 1, end - begin);
    }
  }
  std::fill(row, row + begin, 0.0f);
  std::fill(row + end, row + width, 0.0f);
  if (qkRow && op.qkAfterSoftmax) writeQk(qkRow, row, begin, end, Sk);
}

int64_t strideOr(int64_t stride, int64_t fallback) { return stride >= 0 ? stride : fallback; }

}  // namespace

void fusedAttention(KernelContext& ctx, const AttentionOperands& o, const Tensor* mask, float scale,
                    Tensor& y, const AttentionOptions& options) {
  const int64_t B = o.B, Sq = o.Sq, H = o.H, Dk = o.Dk, Sk = o.Sk, Dv = o.Dv;
  std::array<int64_t, 4> ms{};
  if (mask &&
      (mask->dtype() != DataType::kFloat32 || !maskStrides(mask->shape(), {B, H, Sq, Sk}, &ms))) {
    ctx.fail("mask " + mask->describe() + " must be float32 and broadcast to the scores [" +
                 std::to_string(B) + "x" + std::to_string(H) + "x" + std::to_string(Sq) + "x" +
                 std::to_string(Sk) + "]",
             ErrorCode::kInvalidArgument);
  }
  if (y.numel() == 0) return;
  float* py = y.data<float>();
  if (Sk == 0) {  // no keys: every output row is an empty sum
    std::fill(py, py + y.numel(), 0.0f);
    if (options.qk) std::fill(options.qk, options.qk + B * H * Sq * Sk, 0.0f);
    return;
  }
  const int64_t qBatch = strideOr(o.qBatch, Sq * o.qRow), qHead = strideOr(o.qHead, Dk);
  const int64_t kBatch = strideOr(o.kBatch, Sk * o.kRow), kHead = strideOr(o.kHead, Dk);
  const int64_t vBatch = strideOr(o.vBatch, Sk * o.vRow), vHead = strideOr(o.vHead, Dv);
  const int64_t group = std::max<int64_t>(o.kvGroup, 1);
  const bool plain = options.plain();
  const int64_t ld = Sk + 1;  // room for a sink logit after the last key
  const float* pm = mask ? mask->data<float>() : nullptr;
  const int64_t blocks = (Sq + kRowBlock - 1) / kRowBlock;
  const int threads = poolThreads();
  const AttentionScratch scratch = attentionScratch(Sq, Sk, Dk, Dv);
  auto* ws = static_cast<uint8_t*>(
      ctx.workspace(fusedAttentionWorkspaceBytes(B, Sq, Sk, H, Dk, Dv, threads)));
  forEachThreadPart(
      attentionTasks(B, Sq, H), threads, [&](int64_t part, int64_t begin, int64_t end) {
        const ThreadPoolScope serial(nullptr);  // the products run on this task's thread alone
        uint8_t* mine = ws + part * scratch.total();
        float* scores = reinterpret_cast<float*>(mine);
        float* maskRow = reinterpret_cast<float*>(mine + scratch.scoresBytes);
        void* gemmWs = mine + scratch.scoresBytes + scratch.maskRowBytes;
        for (int64_t task = begin; task < end; ++task) {
          const int64_t b = task / (H * blocks), h = task / blocks % H,
                        i0 = task % blocks * kRowBlock;
          const int64_t rows = std::min(kRowBlock, Sq - i0);
          const float* qBlock = o.q + b * qBatch + h * qHead + i0 * o.qRow;
          const float* kHeadPtr = o.k + b * kBatch + h / group * kHead;
          const float* vHeadPtr = o.v + b * vBatch + h / group * vHead;
          int64_t width = Sk;  // the keys any row of the block sees are below it
          if (options.keyEnd) {
            width = 0;
            for (int64_t r = 0; r < rows; ++r)
              width = std::max(width, keyRange(options, b, i0 + r, Sq, Sk).second);
          }
          if (width > 0) {
            sgemm(false, true, rows, width, Dk, scale, qBlock, o.qRow, kHeadPtr, o.kRow, 0.0f,
                  scores, ld, gemmWs);
          }
          const float* maskBlock = pm ? pm + b * ms[0] + h * ms[1] + i0 * ms[2] : nullptr;
          if (plain && (!pm || ms[3] == 1)) {  // mask rows are contiguous along the keys
            softmaxRows(scores, ld, maskBlock, ms[2], rows, Sk);
          } else {
            for (int64_t r = 0; r < rows; ++r) {
              const float* m = nullptr;
              if (pm && ms[3] == 1) {
                m = maskBlock + r * ms[2];
              } else if (pm) {  // one mask value per query row, repeated across the keys
                std::fill(maskRow, maskRow + Sk, maskBlock[r * ms[2]]);
                m = maskRow;
              }
              const auto [first, last] = keyRange(options, b, i0 + r, Sq, Sk);
              const float zero = 0.0f;
              const float* sink = options.sinks           ? options.sinks + h
                                  : options.smoothSoftmax ? &zero
                                                          : nullptr;
              float* qkRow = options.qk ? options.qk + ((b * H + h) * Sq + i0 + r) * Sk : nullptr;
              rowProbabilities(scores + r * ld, m, first, last, width, options, sink, qkRow, Sk);
            }
          }
          float* yBlock = py + ((b * Sq + i0) * H + h) * Dv;
          if (width == 0) {
            for (int64_t r = 0; r < rows; ++r) std::fill_n(yBlock + r * H * Dv, Dv, 0.0f);
            continue;
          }
          sgemm(false, false, rows, Dv, width, 1.0f, scores, ld, vHeadPtr, o.vRow, 0.0f, yBlock,
                H * Dv, gemmWs);
        }
      });
}

void runAttentionInFloat(KernelContext& ctx, const std::function<void(KernelContext&)>& run) {
  const DataType type = ctx.hasInput(0) ? ctx.input(0).dtype() : DataType::kFloat32;
  if (!isHalfLike(type)) return run(ctx);
  std::vector<Tensor> copies(ctx.numInputs());
  std::vector<const Tensor*> inputs(ctx.numInputs(), nullptr);
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    if (!ctx.hasInput(i)) continue;
    const Tensor& in = ctx.input(i);
    inputs[i] = &in;
    if (in.dtype() == type) inputs[i] = &(copies[i] = toFloatCopy(in));
  }
  std::vector<Tensor> outputs(ctx.numOutputs());
  const std::vector<ir::TypeInfo> types(ctx.numOutputs(), ir::TypeInfo{DataType::kFloat32, {}});
  KernelContext inFloat(ctx, inputs, outputs, types);
  run(inFloat);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined()) continue;
    if (outputs[i].dtype() != DataType::kFloat32) {
      ctx.setOutput(i, outputs[i]);
      continue;
    }
    storeFromFloat(outputs[i], ctx.allocateOutput(i, type, outputs[i].shape()));
  }
}

namespace {

void fusedAttentionKernel(KernelContext& ctx, float scale, int64_t packedHeads) {
  const bool packed = !ctx.hasInput(1) && !ctx.hasInput(2);
  const AttentionOperands o =
      packed ? packedAttentionOperands(ctx, ctx.input(0), packedHeads) : separateOperands(ctx);
  fusedAttention(ctx, o, ctx.hasInput(3) ? &ctx.input(3) : nullptr, scale, ctx.output(0));
}

// The workspace for inputs of these shapes: separate Q [B, Sq, H, Dk], K [B, Sk, H, Dk] and V
// [B, Sk, H, Dv], or one packed [B, S, 3 * heads * D].
uint64_t fusedAttentionKernelWorkspace(const std::vector<const Shape*>& in, int64_t packedHeads,
                                       int threads) {
  const Shape* q = in.empty() ? nullptr : in[0];
  const Shape* k = in.size() > 1 ? in[1] : nullptr;
  const Shape* v = in.size() > 2 ? in[2] : nullptr;
  if (!q) return 0;
  if (!k && !v) {
    if (q->size() != 3 || packedHeads <= 0) return 0;
    const int64_t D = (*q)[2] / (3 * packedHeads);
    return fusedAttentionWorkspaceBytes((*q)[0], (*q)[1], (*q)[1], packedHeads, D, D, threads);
  }
  if (!k || !v || q->size() != 4 || k->size() != 4 || v->size() != 4) return 0;
  return fusedAttentionWorkspaceBytes((*q)[0], (*q)[1], (*k)[1], (*q)[2], (*q)[3], (*v)[3],
                                      threads);
}

Kernel makeFusedAttentionKernel(const KernelCreateInfo& info) {
  const float scale = ir::attrFloat(info.node, "scale", 1.0f);
  const int64_t heads = ir::attrInt(info.node, "num_heads", 0);
  return {[scale, heads](KernelContext& ctx) { fusedAttentionKernel(ctx, scale, heads); },
          [heads](const std::vector<const Shape*>& in, int threads) {
            return fusedAttentionKernelWorkspace(in, heads, threads);
          },
          {}};
}

const bool kRegistered = [] {
  KernelRegistry::global().addGenericKernel("kiln", "FusedAttention", makeFusedAttentionKernel);
  return true;
}();

}  // namespace

}  // namespace kiln::cpu
