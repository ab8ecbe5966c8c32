// kiln::FusedAttention (made by src/opt/fuse_attention.cpp): Y = softmax(scale * Q K^T + mask) V
// for each batch and head, with Q [B, Sq, H, Dk], K [B, Sk, H, Dk], V [B, Sk, H, Dv] and Y
// [B, Sq, H, Dv], or Q, K and V side by side in one [B, S, 3 * H * D] input (the packed form, made
// when their projections are one GEMM). Heads are read in place through row strides (no
// transposes); a block of query rows has its scores, mask, softmax and product with V done while
// the scores are in cache, and the (batch, head, row block) tasks run in parallel on the pool.
#include <algorithm>
#include <array>
#include <vector>

#include "backends/cpu/kernels/fused_attention.h"

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
  return {cacheLineBytes(static_cast<uint64_t>(rows * Sk) * sizeof(float)),
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

void fusedAttention(KernelContext& ctx, const AttentionOperands& o, const Tensor* mask, float scale,
                    Tensor& y) {
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
    return;
  }
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
          const float* qBlock = o.q + (b * Sq + i0) * o.qRow + h * Dk;
          const float* kHead = o.k + b * Sk * o.kRow + h * Dk;
          const float* vHead = o.v + b * Sk * o.vRow + h * Dv;
          sgemm(false, true, rows, Sk, Dk, scale, qBlock, o.qRow, kHead, o.kRow, 0.0f, scores, Sk,
                gemmWs);
          if (!pm) {
            softmaxRows(scores, Sk, nullptr, 0, rows, Sk);
          } else if (ms[3] == 1) {  // mask rows are contiguous along the keys
            softmaxRows(scores, Sk, pm + b * ms[0] + h * ms[1] + i0 * ms[2], ms[2], rows, Sk);
          } else {  // one mask value per query row, repeated across the keys
            for (int64_t r = 0; r < rows; ++r) {
              std::fill(maskRow, maskRow + Sk, pm[b * ms[0] + h * ms[1] + (i0 + r) * ms[2]]);
              softmaxRows(scores + r * Sk, Sk, maskRow, 0, 1, Sk);
            }
          }
          sgemm(false, false, rows, Dv, Sk, 1.0f, scores, Sk, vHead, o.vRow, 0.0f,
                py + ((b * Sq + i0) * H + h) * Dv, H * Dv, gemmWs);
        }
      });
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
