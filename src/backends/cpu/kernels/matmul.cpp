// CPU kernels for MatMul (numpy semantics, batch broadcasting), MatMulInteger and Gemm, all on the
// GEMM routines. Their float32 families first try bf16_{matmul,gemm}_packed_b_avx512bf16 (layers
// the builder marked bf16, bf16_candidates.h), f16w_{matmul,gemm}_packed_b_{avx512,avx2} (layers
// marked fp16, f16w_candidates.h), then f32_{matmul,gemm}_packed_b_{avx512,avx2}: a
// constant 2-D B (weights) packed once, when the kernel is made, for that ISA's sgemm micro-kernel
// (sgemm itself hands a single row or column to its GEMV); then any_{mat_mul,gemm}_generic.
#include "backends/cpu/broadcast.h"
#include "backends/cpu/gemm/float_copy.h"
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/gemm/zero_point.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/bf16_candidates.h"
#include "backends/cpu/kernels/f16w_candidates.h"
#include "backends/cpu/kernels/node_label.h"
#include "core/dtype_dispatch.h"
#include "ir/shape_helpers.h"

namespace kiln::cpu {
namespace {

// Calls fn(TypeTag<T>{}) for the types MatMul and Gemm compute directly (16-bit floats are
// computed through float copies before this).
template <typename Fn>
void dispatchNativeGemmType(DataType type, const char* what, Fn&& fn) {
  switch (type) {
    case DataType::kFloat32:
      return fn(TypeTag<float>{});
    case DataType::kFloat64:
      return fn(TypeTag<double>{});
    case DataType::kInt32:
      return fn(TypeTag<int32_t>{});
    case DataType::kInt64:
      return fn(TypeTag<int64_t>{});
    case DataType::kUint32:
      return fn(TypeTag<uint32_t>{});
    case DataType::kUint64:
      return fn(TypeTag<uint64_t>{});
    default:
      throwUnsupportedType(type, what);
  }
}

// MatMul operands viewed as stacks of matrices: [batch..., M, K] x [batch..., K, N].
struct MatMulDims {
  Shape aBatch, bBatch, outBatch;
  int64_t M = 0, N = 0, K = 0;
};

// M, N, K and the batch shapes of non-scalar operands (a 1-D one padded to a matrix); the
// inner dimensions are not checked and outBatch is left empty.
MatMulDims gemmDimsOf(const Shape& a, const Shape& b) {
  Shape pa = a, pb = b;
  if (pa.size() == 1) pa.insert(pa.begin(), 1);
  if (pb.size() == 1) pb.push_back(1);
  MatMulDims d;
  d.M = pa[pa.size() - 2];
  d.K = pa.back();
  d.N = pb.back();
  d.aBatch.assign(pa.begin(), pa.end() - 2);
  d.bBatch.assign(pb.begin(), pb.end() - 2);
  return d;
}

MatMulDims matMulDims(const KernelContext& ctx, const ir::Node& label, const Shape& a,
                      const Shape& b) {
  if (a.empty() || b.empty())
    ctx.fail("MatMul inputs must not be scalars", ErrorCode::kInvalidArgument);
  MatMulDims d = gemmDimsOf(a, b);
  if (b.size() == 1 ? b[0] != d.K : b[b.size() - 2] != d.K) {
    ctx.fail("inner dimensions differ: " + shapeToString(a) + " x " + shapeToString(b),
             ErrorCode::kInvalidArgument);
  }
  d.outBatch = ir::broadcastShapes(label, d.aBatch, d.bBatch);
  return d;
}

// With one right-hand matrix for every batch, the batch folds into the rows: one large GEMM of
// this many rows (else one GEMM of M rows per batch).
int64_t gemmRows(const MatMulDims& d) {
  return shapeNumel(d.bBatch) == 1 ? shapeNumel(d.aBatch) * d.M : d.M;
}

// Scratch of the GEMMs of a MatMul with operands of these shapes: sgemm's, against `packedB` when
// it holds B, when the product is computed in float (float32 and the 16-bit floats); 0 for
// shapes it cannot multiply.
uint64_t matMulWorkspaceBytes(const Shape& a, const Shape& b, const PackedMatrix& packedB,
                              bool floatMath, int threads) {
  if (a.empty() || b.empty() || !floatMath) return 0;
  const MatMulDims d = gemmDimsOf(a, b);
  if (!packedB.empty() && b.size() == 2 && packedB.rows() == d.K && packedB.cols() == d.N)
    return sgemmWorkspaceBytes(packedB, gemmRows(d), threads);
  return sgemmWorkspaceBytes(gemmRows(d), d.N, d.K, threads);
}

template <typename T>
void batchedMatMul(const MatMulDims& d, const T* a, const T* b, T* y, void* workspace) {
  const int64_t aStep = d.M * d.K, bStep = d.K * d.N, yStep = d.M * d.N;
  if (shapeNumel(d.bBatch) == 1) {
    gemm<T>(false, false, gemmRows(d), d.N, d.K, T(1), a, d.K, b, d.N, T(0), y, d.N, workspace);
    return;
  }
  forEachBroadcastRun<2>(
      d.outBatch, {&d.aBatch, &d.bBatch},
      [&](int64_t o, const std::array<int64_t, 2>& off, int64_t n,
          const std::array<int64_t, 2>& st) {
        for (int64_t j = 0; j < n; ++j) {
          gemm<T>(false, false, d.M, d.N, d.K, T(1), a + (off[0] + j * st[0]) * aStep, d.K,
                  b + (off[1] + j * st[1]) * bStep, d.N, T(0), y + (o + j) * yStep, d.N, workspace);
        }
      });
}

// A constant 2-D float32 B (a Linear layer's weights) packed once for `isa`'s GEMM micro-kernel.
PackedMatrix packConstantB(const KernelCreateInfo& info, bool transB, CpuIsa isa) {
  const Tensor* b = info.constants.size() > 1 ? info.constants[1] : nullptr;
  if (!b || b->dtype() != DataType::kFloat32 || b->rank() != 2 || b->numel() == 0) return {};
  const int64_t K = b->dim(transB ? 1 : 0), N = b->dim(transB ? 0 : 1);
  return packB(transB, K, N, b->data<float>(), b->dim(1), isa);
}

void matMulKernel(KernelContext& ctx, const ir::Node& label, const PackedMatrix& packedB) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const MatMulDims d = matMulDims(ctx, label, a.shape(), b.shape());
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  const bool floatMath = a.dtype() == DataType::kFloat32 || isHalfLike(a.dtype());
  const PackedMatrix& usable = a.dtype() == DataType::kFloat32 ? packedB : PackedMatrix();
  void* ws =
      ctx.workspace(matMulWorkspaceBytes(a.shape(), b.shape(), usable, floatMath, poolThreads()));
  if (!usable.empty() && b.rank() == 2 && usable.rows() == d.K && usable.cols() == d.N) {
    // One B for every batch: the stacked rows of A are one GEMM against the packed weights.
    sgemmPacked(false, gemmRows(d), 1.0f, a.data<float>(), d.K, usable, 0.0f, y.data<float>(), d.N,
                ws);
    return;
  }
  if (isHalfLike(a.dtype())) {
    const Tensor fa = toFloatCopy(a), fb = toFloatCopy(b);
    Tensor fy(DataType::kFloat32, y.shape());
    batchedMatMul<float>(d, fa.data<float>(), fb.data<float>(), fy.data<float>(), ws);
    storeFromFloat(fy, y);
    return;
  }
  dispatchNativeGemmType(a.dtype(), "MatMul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    batchedMatMul<T>(d, a.data<T>(), b.data<T>(), y.data<T>(), ws);
  });
}

// int32 result of 8-bit operands; a_zero_point is per tensor or per row of A, b_zero_point per
// tensor or per column of B.
void matMulIntegerKernel(KernelContext& ctx, const ir::Node& label) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor* aZero = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
  const Tensor* bZero = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
  const MatMulDims d = matMulDims(ctx, label, a.shape(), b.shape());
  for (const std::string& problem :
       {checkZeroPoint(aZero, d.M, "a_zero_point"), checkZeroPoint(bZero, d.N, "b_zero_point")}) {
    if (!problem.empty()) ctx.fail(problem, ErrorCode::kInvalidArgument);
  }
  const Tensor wa = widenMinusZeroPoint(a, aZero, d.K, d.M);
  const Tensor wb = widenMinusZeroPoint(b, bZero, 1, d.N);
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  batchedMatMul<int32_t>(d, wa.data<int32_t>(), wb.data<int32_t>(), y.data<int32_t>(), nullptr);
}

// Writes C (rank <= 2, broadcast one way onto M x N) into y.
template <typename T>
void broadcastBias(const Tensor& c, int64_t M, int64_t N, T* y) {
  const Shape& cs = c.shape();
  const int64_t cRows = cs.size() == 2 ? cs[0] : 1;
  const int64_t cCols = cs.empty() ? 1 : cs.back();
  const T* src = c.data<T>();
  for (int64_t i = 0; i < M; ++i) {
    const T* row = src + (cRows == 1 ? 0 : i) * cCols;
    T* out = y + i * N;
    if (cCols == 1) {
      for (int64_t j = 0; j < N; ++j) out[j] = row[0];
    } else {
      for (int64_t j = 0; j < N; ++j) out[j] = row[j];
    }
  }
}

struct GemmParams {
  bool transA = false, transB = false;
  float alpha = 1.0f, beta = 1.0f;
};

template <typename T>
void runGemm(const GemmParams& p, const Tensor& a, const Tensor& b, const Tensor* c, T* y,
             int64_t M, int64_t N, int64_t K, void* workspace) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  const int64_t lda = a.dim(1), ldb = b.dim(1);
  const bool useC = c != nullptr && p.beta != 0.0f;
  if (useC) broadcastBias<T>(*c, M, N, y);
  if constexpr (std::is_integral_v<T>) {
    // alpha and beta are floats: multiply exactly in integers, then scale in double.
    std::vector<T> product(static_cast<size_t>(M * N));
    referenceGemm<T>(p.transA, p.transB, M, N, K, T(1), pa, lda, pb, ldb, T(0), product.data(), N);
    for (int64_t i = 0; i < M * N; ++i) {
      const double bias = useC ? static_cast<double>(p.beta) * static_cast<double>(y[i]) : 0.0;
      y[i] = static_cast<T>(static_cast<double>(p.alpha) *
                                static_cast<double>(product[static_cast<size_t>(i)]) +
                            bias);
    }
  } else {
    gemm<T>(p.transA, p.transB, M, N, K, static_cast<T>(p.alpha), pa, lda, pb, ldb,
            useC ? static_cast<T>(p.beta) : T(0), y, N, workspace);
  }
}

// "" when input 1 is a constant 2-D float32 B that the packed candidates can keep packed.
std::string packedBDeclines(const KernelCreateInfo& info) {
  const Tensor* b = info.constants.size() > 1 ? info.constants[1] : nullptr;
  if (!b) return "B is not a constant";
  if (b->dtype() != DataType::kFloat32 || b->rank() != 2 || b->numel() == 0)
    return "B " + b->describe() + " is not a 2-D float32 matrix";
  return "";
}

// Whether a node's first input is a float type the kernels multiply in float (sgemm).
bool multipliesInFloat(const KernelCreateInfo& info) {
  const ir::TypeInfo* t = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  return t && (t->dtype == DataType::kFloat32 || isHalfLike(t->dtype));
}

// The workspace of a MatMul kernel, B packed or not.
WorkspaceFn matMulWorkspace(const KernelCreateInfo& info, const PackedMatrix& packedB) {
  return [packedB, floatMath = multipliesInFloat(info)](const std::vector<const Shape*>& in,
                                                        int threads) -> uint64_t {
    if (in.size() < 2 || !in[0] || !in[1]) return 0;
    return matMulWorkspaceBytes(*in[0], *in[1], packedB, floatMath, threads);
  };
}

Kernel makeMatMulKernel(const KernelCreateInfo& info) {
  return {[label = nodeLabel(info.node)](KernelContext& ctx) { matMulKernel(ctx, label, {}); },
          matMulWorkspace(info, {}),
          {}};
}

KernelBlob blobOf(const PackedMatrix& m) {
  return {m.data(), static_cast<uint64_t>(m.floats()) * sizeof(float)};
}

// Constant B packed for `isa`'s micro-kernel, or (with `saved`) the packing a plan holds.
PackedMatrix packedB(const KernelCreateInfo& info, bool transB, CpuIsa isa,
                     const KernelState* saved) {
  if (!saved) return packConstantB(info, transB, isa);
  const Tensor& b = *info.constants[1];  // its shape; the plan may hold no values
  const int64_t K = b.dim(transB ? 1 : 0), N = b.dim(transB ? 0 : 1);
  using Side = PackedMatrix::Side;
  return PackedMatrix::view(
      Side::kB, isa, K, N,
      savedFloats(info.node, *saved, 0, PackedMatrix::packedFloats(Side::kB, isa, K, N)));
}

Kernel makePackedMatMulKernel(const KernelCreateInfo& info, CpuIsa isa, const KernelState* saved) {
  const PackedMatrix b = packedB(info, false, isa, saved);
  info.keepsOwnCopyOf(1);  // A is float32 too (same type), so B is only read packed
  return {[label = nodeLabel(info.node), b](KernelContext& ctx) { matMulKernel(ctx, label, b); },
          matMulWorkspace(info, b),
          [b] {
            return KernelState{
                {}, {blobOf(b)}, std::shared_ptr<const void>(b.data(), [](const void*) {})};
          }};
}

// Gemm with a constant float32 B: B packed once, and a constant C that is one row (a Linear
// layer's bias, 1-D [N] or [1, N]) folded, times beta, into the GEMM epilogue.
struct PackedGemm {
  PackedMatrix b;
  std::vector<float> bias;  // beta * C, when C is a constant row of N values
};

PackedGemm prepareGemm(const KernelCreateInfo& info, const GemmParams& p, CpuIsa isa,
                       const KernelState* saved) {
  PackedGemm g;
  g.b = packedB(info, p.transB, isa, saved);
  if (saved) {  // beta * C, when folded, is its second blob
    if (saved->blobs.size() > 1) {
      const int64_t n = g.b.cols();
      const std::shared_ptr<const float> bias = savedFloats(info.node, *saved, 1, n);
      g.bias.assign(bias.get(), bias.get() + n);
    }
    return g;
  }
  const Tensor* c = info.constants.size() > 2 ? info.constants[2] : nullptr;
  if (g.b.empty() || !c || c->dtype() != DataType::kFloat32 || p.beta == 0.0f) return g;
  const bool row = c->rank() == 1 || (c->rank() == 2 && c->dim(0) == 1);
  if (!row || c->numel() != g.b.cols() || c->numel() == 1) return g;
  const float* src = c->data<float>();
  g.bias.assign(src, src + c->numel());
  for (float& v : g.bias) v *= p.beta;
  return g;
}

// Whether the packed B serves a product of this A type and these dimensions.
bool packedGemmFits(const PackedGemm& g, DataType aType, int64_t N, int64_t K) {
  return !g.b.empty() && aType == DataType::kFloat32 && g.b.rows() == K && g.b.cols() == N;
}

// Y = alpha * op(A) * B + beta * C on the packed B, when packedGemmFits.
void runPackedGemm(const GemmParams& p, const PackedGemm& g, const Tensor& a, const Tensor* c,
                   Tensor& y, int64_t M, int64_t N, void* workspace) {
  float* out = y.data<float>();
  GemmEpilogue ep;
  float beta = 0.0f;
  if (c && p.beta != 0.0f) {
    if (!g.bias.empty()) {
      ep.bias = g.bias.data();
    } else {
      broadcastBias<float>(*c, M, N, out);
      beta = p.beta;
    }
  }
  sgemmPacked(p.transA, M, p.alpha, a.data<float>(), a.dim(1), g.b, beta, out, N, workspace, ep);
}

// Scratch of a Gemm of op(A) M x K and op(B) K x N: the packed B's, or sgemm's when it computes
// in float.
uint64_t gemmWorkspaceBytes(const PackedGemm& g, bool floatMath, bool packedFits, int64_t M,
                            int64_t N, int64_t K, int threads) {
  if (packedFits) return sgemmWorkspaceBytes(g.b, M, threads);
  return floatMath ? sgemmWorkspaceBytes(M, N, K, threads) : 0;
}

GemmParams gemmParams(const ir::Node& node) {
  GemmParams p;
  p.transA = ir::attrInt(node, "transA", 0) != 0;
  p.transB = ir::attrInt(node, "transB", 0) != 0;
  p.alpha = ir::attrFloat(node, "alpha", 1.0f);
  p.beta = ir::attrFloat(node, "beta", 1.0f);
  return p;
}

// Gemm with B packed (and a constant bias row folded) when `packed` holds them.
KernelFn gemmKernel(const GemmParams& p, const PackedGemm& packed) {
  return [p, packed](KernelContext& ctx) {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Tensor* c = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
    if (a.rank() != 2 || b.rank() != 2)
      ctx.fail("A and B must be 2-D", ErrorCode::kInvalidArgument);
    const int64_t M = a.dim(p.transA ? 1 : 0), K = a.dim(p.transA ? 0 : 1);
    const int64_t N = b.dim(p.transB ? 0 : 1);
    if (b.dim(p.transB ? 1 : 0) != K)
      ctx.fail("inner dimensions differ", ErrorCode::kInvalidArgument);
    if (c && c->rank() > 2) ctx.fail("C must have rank <= 2", ErrorCode::kInvalidArgument);
    Tensor& y = ctx.output(0);
    if (y.numel() == 0) return;
    const bool fits = packedGemmFits(packed, a.dtype(), N, K);
    const bool floatMath = a.dtype() == DataType::kFloat32 || isHalfLike(a.dtype());
    void* ws = ctx.workspace(gemmWorkspaceBytes(packed, floatMath, fits, M, N, K, poolThreads()));
    if (fits) return runPackedGemm(p, packed, a, c, y, M, N, ws);
    if (isHalfLike(a.dtype())) {
      const Tensor fa = toFloatCopy(a), fb = toFloatCopy(b);
      const Tensor fc = c ? toFloatCopy(*c) : Tensor();
      Tensor fy(DataType::kFloat32, y.shape());
      runGemm<float>(p, fa, fb, c ? &fc : nullptr, fy.data<float>(), M, N, K, ws);
      storeFromFloat(fy, y);
      return;
    }
    dispatchNativeGemmType(a.dtype(), "Gemm", [&](auto tag) {
      using T = typename decltype(tag)::type;
      runGemm<T>(p, a, b, c, y.data<T>(), M, N, K, ws);
    });
  };
}

// The workspace of a Gemm kernel, B packed (non-empty) or not.
WorkspaceFn gemmWorkspace(const KernelCreateInfo& info, const GemmParams& p,
                          const PackedGemm& packed) {
  const ir::TypeInfo* t = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  const DataType aType = t ? t->dtype : DataType::kUndefined;
  return [p, packed, aType, floatMath = multipliesInFloat(info)](
             const std::vector<const Shape*>& in, int threads) -> uint64_t {
    if (in.size() < 2 || !in[0] || !in[1] || in[0]->size() != 2 || in[1]->size() != 2) return 0;
    const Shape& a = *in[0];
    const Shape& b = *in[1];
    const int64_t M = a[p.transA ? 1 : 0], K = a[p.transA ? 0 : 1], N = b[p.transB ? 0 : 1];
    return gemmWorkspaceBytes(packed, floatMath, packedGemmFits(packed, aType, N, K), M, N, K,
                              threads);
  };
}

Kernel makePackedGemmKernel(const KernelCreateInfo& info, CpuIsa isa, const KernelState* saved) {
  const GemmParams p = gemmParams(info.node);
  auto packed = std::make_shared<const PackedGemm>(prepareGemm(info, p, isa, saved));
  info.keepsOwnCopyOf(1);  // float32 A (same type as B) always takes the packed path
  if (!packed->bias.empty()) info.keepsOwnCopyOf(2);
  return {gemmKernel(p, *packed), gemmWorkspace(info, p, *packed), [packed] {
            KernelState state{{}, {blobOf(packed->b)}, packed};
            if (!packed->bias.empty())
              state.blobs.push_back({packed->bias.data(), packed->bias.size() * sizeof(float)});
            return state;
          }};
}

const bool kRegistered = [] {
  KernelRegistry& r = KernelRegistry::global();
  for (const char* op : {"MatMul", "Gemm"}) {
    addBf16MatMulCandidate(r, op);
    addHalfWeightMatMulCandidates(r, op);
    for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2}) {
      KernelCandidate c;
      c.id = std::string("f32_") + (op == std::string("Gemm") ? "gemm" : "matmul") + "_packed_b_" +
             cpuIsaName(isa);
      c.isa = isa;
      c.supports = packedBDeclines;
      const auto make = op == std::string("Gemm") ? makePackedGemmKernel : makePackedMatMulKernel;
      c.create = [make, isa](const KernelCreateInfo& info) { return make(info, isa, nullptr); };
      c.restore = [make, isa](const KernelCreateInfo& info, const KernelState& s) {
        return make(info, isa, &s);
      };
      r.addCandidate("", op, DataType::kFloat32, std::move(c));
    }
  }
  // Every dtype, B as it comes (float32 falls back here when B is not a constant matrix).
  r.addGenericKernel("", "MatMul", makeMatMulKernel);
  r.addGenericKernel("", "Gemm", [](const KernelCreateInfo& info) -> Kernel {
    const GemmParams p = gemmParams(info.node);
    return {gemmKernel(p, {}), gemmWorkspace(info, p, {}), {}};
  });
  return true;
}();

}  // namespace

KILN_REGISTER_CPU_KERNEL("MatMulInteger",
                         KernelFactory([](const KernelCreateInfo& info) -> KernelFn {
                           return [label = nodeLabel(info.node)](KernelContext& ctx) {
                             matMulIntegerKernel(ctx, label);
                           };
                         }));

}  // namespace kiln::cpu
