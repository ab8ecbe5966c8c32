// The integer-GEMM candidates of QLinearMatMul and MatMulInteger (qgemm_ops.h): C = A x B with B
// the packed right operand, A's rows (all batches stacked) packed per call.
#include <algorithm>

#include "backends/cpu/kernels/qgemm_op_support.h"
#include "backends/cpu/kernels/qgemm_ops.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

constexpr uint64_t kAlign = 64;

uint64_t alignUp(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

struct QMatMul {
  QProductSignature s;
  PackedQMatrix b;
  int64_t K = 0, N = 0;
  bool aSigned = false;
};

// The rows of A ([..., M, K]: every dimension but the last) and M itself.
int64_t rowsOf(const Shape& a) {
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < a.size(); ++d) rows *= a[d];
  return rows;
}

// Scratch after qgemm's: N multipliers, a zero point per row, b zero points (N).
uint64_t workspaceBytes(const QMatMul& m, int64_t rows, int threads) {
  return alignUp(qgemmWorkspaceBytes(QSide::kRight, m.b.isa(), rows, m.N, m.K, threads)) +
         alignUp(static_cast<uint64_t>(m.N) * 4) +
         alignUp(static_cast<uint64_t>(std::max<int64_t>(rows, 1)) * 4) +
         alignUp(static_cast<uint64_t>(m.N) * 4);
}

void runQMatMul(const QMatMul& m, KernelContext& ctx) {
  const QProductSignature& s = m.s;
  const Tensor& a = ctx.input(static_cast<size_t>(s.a));
  if (a.rank() < 1 || a.dim(a.rank() - 1) != m.K) {
    ctx.fail(
        "A " + a.describe() + " must have K = " + std::to_string(m.K) + " columns, as B has rows",
        ErrorCode::kInvalidArgument);
  }
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  const int64_t rows = rowsOf(a.shape());
  const int64_t M = a.rank() >= 2 ? a.dim(a.rank() - 2) : 1;
  const ThreadPool* pool = currentThreadPool();
  const int threads = pool ? pool->size() : 1;
  uint8_t* ws = static_cast<uint8_t*>(ctx.workspace(workspaceBytes(m, rows, threads)));
  uint8_t* extra =
      ws + alignUp(qgemmWorkspaceBytes(QSide::kRight, m.b.isa(), rows, m.N, m.K, threads));
  float* multipliers = reinterpret_cast<float*>(extra);
  int32_t* zeroA = reinterpret_cast<int32_t*>(extra + alignUp(static_cast<uint64_t>(m.N) * 4));
  int32_t* zeroB = reinterpret_cast<int32_t*>(reinterpret_cast<uint8_t*>(zeroA) +
                                              alignUp(static_cast<uint64_t>(rows) * 4));

  QGemmProblem p;
  p.M = rows;
  p.N = m.N;
  p.K = m.K;
  p.weights = &m.b;
  p.activations = {a.raw(), m.K, 1, m.aSigned};
  const int64_t nA = loadZeroPoints(ctx, s.aZero, "a_zero_point", M, m.aSigned ? 128 : 0, zeroA);
  for (int64_t r = nA > 1 ? rows - 1 : 0; r >= M; --r)
    zeroA[r] = zeroA[r % M];  // per row of every matrix
  p.zeroLeft = zeroA;
  p.zeroLeftCount = nA > 1 ? rows : 1;
  p.zeroRight = zeroB;
  p.zeroRightCount =
      loadZeroPoints(ctx, s.bZero, "b_zero_point", m.N, m.b.sourceUnsigned() ? -128 : 0, zeroB);
  p.bias = productBias(ctx, s, m.N);
  p.output = productOutput(ctx, s, y.dtype(), m.N, "a_scale", "b_scale", multipliers);
  p.C = y.raw();
  p.ldc = m.N;
  qgemm(p, ws);
}

Kernel makeQMatMul(const KernelCreateInfo& info, CpuIsa isa, const QProductSignature& s,
                   const KernelState* saved) {
  auto m = std::make_shared<QMatMul>();
  m->s = s;
  const Tensor& b = *constantInput(info, s.b);  // its shape; a plan's constant may hold no values
  m->K = b.dim(s.transB ? 1 : 0);
  m->N = b.dim(s.transB ? 0 : 1);
  m->aSigned = inputType(info, s.a)->dtype == DataType::kInt8;
  if (saved) {
    m->b = savedQWeights(info.node, *saved, 0, QSide::kRight, isa, m->N, m->K);
  } else {
    const QMatrixView view{b.raw(), s.transB ? m->K : 1, s.transB ? 1 : m->N,
                           b.dtype() == DataType::kInt8};
    m->b = packQWeights(QSide::kRight, isa, m->N, m->K, view);
  }
  info.keepsOwnCopyOf(static_cast<size_t>(s.b));
  Kernel k;
  k.run = [m](KernelContext& ctx) { runQMatMul(*m, ctx); };
  const int input = s.a;
  k.workspace = [m, input](const std::vector<const Shape*>& shapes, int threads) -> uint64_t {
    const Shape* a =
        static_cast<size_t>(input) < shapes.size() ? shapes[static_cast<size_t>(input)] : nullptr;
    return a ? workspaceBytes(*m, rowsOf(*a), threads) : 0;
  };
  k.save = [m] { return KernelState{m->b.params(), {blobOf(m->b)}, m}; };
  return k;
}

QProductSignature qlinearMatMulSignature(const ir::Node&) {
  QProductSignature s;
  s.a = 0, s.aScale = 1, s.aZero = 2, s.b = 3, s.bScale = 4, s.bZero = 5, s.yScale = 6, s.yZero = 7;
  return s;
}

const bool kRegistered = [] {
  KernelRegistry& r = KernelRegistry::global();
  for (DataType dtype : {DataType::kUint8, DataType::kInt8}) {  // A's type
    const std::string a = qactivationsPrefix(dtype);
    for (CpuIsa isa : {CpuIsa::kAvx512Vnni, CpuIsa::kAvxVnni, CpuIsa::kAvx2}) {
      r.addCandidate("", "QLinearMatMul", dtype,
                     qmatmulCandidate(a + "_qlinearmatmul", isa, qlinearMatMulSignature));
      r.addCandidate("", "MatMulInteger", dtype,
                     qmatmulCandidate(a + "_matmulinteger", isa, integerProductSignature));
    }
  }
  return true;
}();

}  // namespace

KernelCandidate qmatmulCandidate(const std::string& prefix, CpuIsa isa, QSignatureFn signature) {
  KernelCandidate c;
  c.id = qkernelId(prefix, isa);
  c.isa = isa;
  c.supports = [signature](const KernelCreateInfo& info) -> std::string {
    const QProductSignature s = signature(info.node);
    if (s.transA) return "transA is set";
    return qproductDeclines(info, s, 2);
  };
  c.create = [isa, signature](const KernelCreateInfo& info) {
    return makeQMatMul(info, isa, signature(info.node), nullptr);
  };
  c.restore = [isa, signature](const KernelCreateInfo& info, const KernelState& state) {
    return makeQMatMul(info, isa, signature(info.node), &state);
  };
  return c;
}

}  // namespace kiln::cpu
