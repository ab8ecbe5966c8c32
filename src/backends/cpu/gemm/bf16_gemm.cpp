// The BF16 GEMM driver: the constant operand comes packed (bf16_gemm.h's layout), the other is
// rounded and packed whole at the start of each call (the threads share that work), then the
// product runs in the Goto order over the two packings: kc x nc panels of B (in L2), each A strip
// (in L1) against every B strip of the panel, the epilogue right after a tile's last depth block.
#include "backends/cpu/gemm/bf16_gemm.h"

#include <algorithm>

#include "backends/cpu/cpu_caches.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/gemm/bf16_gemm_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "core/aligned_memory.h"
#include "core/half.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kMr = kBf16GemmMr, kNr = kBf16GemmNr;
constexpr int64_t kBytesPerValue = 2;

int64_t roundUp(int64_t n, int64_t step) { return (n + step - 1) / step * step; }

// Depths per block: an A strip and a B strip of kc depths fill half of L1 (the other half for C
// and the next strips), kept a multiple of 16 (whole cache lines of pairs).
int64_t depthBlockFromCaches() {
  const int64_t kc = cpuCacheSizes().l1dBytes / 2 / ((kMr + kNr) * kBytesPerValue) / 16 * 16;
  return std::max<int64_t>(kc, 32);
}

// Columns per panel: a kc x nc panel of B fills half of L2.
int64_t panelColumns(int64_t kc) {
  const int64_t nc = cpuCacheSizes().l2Bytes / 2 / (kc * kBytesPerValue) / kNr * kNr;
  return std::max(nc, kNr);
}

// Where things are in one packed operand: `outer` rows (A) or columns (B) padded to whole
// strips of `strip`, over K depths padded to an even Kp, in blocks of kc depths.
struct Layout {
  int64_t outer = 0, padded = 0, K = 0, Kp = 0, kc = 0, strip = 0;

  Layout(int64_t outer_, int64_t K_, int64_t kc_, int64_t strip_)
      : outer(outer_),
        padded(roundUp(std::max<int64_t>(outer_, 1), strip_)),
        K(K_),
        Kp(roundUp(K_, 2)),
        kc(kc_),
        strip(strip_) {}
  int64_t words() const { return padded * Kp / 2; }
  int64_t pairsIn(int64_t k0) const { return std::min(kc, Kp - k0) / 2; }
  // Strip s of the block at depth k0.
  int64_t stripOffset(int64_t k0, int64_t s) const {
    return k0 / 2 * padded + s * strip * pairsIn(k0);
  }
  int64_t strips() const { return padded / strip; }
};

// Packs strips [s0, s1) of op(X) for `side`, X(o, k) read at o * outerStride + k * depthStride,
// value by value with floatToBfloat16Bits (exact round to nearest even; weights, and the rare
// transposed activation).
void packStripsScalar(const Layout& l, const float* X, int64_t outerStride, int64_t depthStride,
                      int64_t s0, int64_t s1, uint32_t* dst) {
  auto bits = [&](int64_t o, int64_t k) -> uint32_t {
    return o < l.outer && k < l.K ? floatToBfloat16Bits(X[o * outerStride + k * depthStride]) : 0u;
  };
  for (int64_t k0 = 0; k0 < l.Kp; k0 += l.kc) {
    const int64_t pairs = l.pairsIn(k0);
    for (int64_t s = s0; s < s1; ++s) {
      uint32_t* out = dst + l.stripOffset(k0, s);
      for (int64_t p = 0; p < pairs; ++p) {
        const int64_t k = k0 + 2 * p;
        for (int64_t lane = 0; lane < l.strip; ++lane) {
          const int64_t o = s * l.strip + lane;
          out[p * l.strip + lane] = bits(o, k) | bits(o, k + 1) << 16;
        }
      }
    }
  }
}

// The strides of op(X)(o, k) in X for an operand on `isA` side, transposed or not.
void operandStrides(bool isA, bool trans, int64_t ld, int64_t* outerStride, int64_t* depthStride) {
  const bool depthContiguous = isA != trans;  // rows of A, or columns of a transposed B
  *outerStride = depthContiguous ? ld : 1;
  *depthStride = depthContiguous ? 1 : ld;
}

// Packs strips [s0, s1) of a run-time operand: with the AVX512_BF16 packers when its layout is
// theirs (row-major A, row-major B), else value by value.
void packStripsRuntime(const Layout& l, bool isA, bool trans, const float* X, int64_t ld,
                       int64_t s0, int64_t s1, uint32_t* dst) {
  if (trans) {
    int64_t outerStride = 0, depthStride = 0;
    operandStrides(isA, trans, ld, &outerStride, &depthStride);
    packStripsScalar(l, X, outerStride, depthStride, s0, s1, dst);
    return;
  }
  const Bf16GemmKernelInfo& ki = bf16GemmKernelAvx512Bf16();
  for (int64_t k0 = 0; k0 < l.Kp; k0 += l.kc) {
    const int64_t pairs = l.pairsIn(k0), depth = std::min(l.kc, l.K - k0);
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t first = s * l.strip, count = std::min(l.strip, l.outer - first);
      uint32_t* out = dst + l.stripOffset(k0, s);
      if (isA) {
        ki.packARows(count, X + first * ld + k0, ld, depth, pairs, out);
      } else {
        ki.packBColumns(count, X + k0 * ld + first, ld, depth, pairs, out);
      }
    }
  }
}

// The packed operands of one product and where its result goes.
struct Problem {
  const uint32_t* a = nullptr;
  const uint32_t* b = nullptr;
  Layout la, lb;
  int64_t M = 0, N = 0;
  float* C = nullptr;
  int64_t ldc = 0;
  bool accumulateC = false;
  const GemmEpilogue* ep = nullptr;
};

// C rows of A strips [is0, is1) x columns of B strips [js0, js1).
void multiplyRange(const Problem& p, int64_t is0, int64_t is1, int64_t js0, int64_t js1) {
  const Bf16MicroKernelFn kernel = bf16GemmKernelAvx512Bf16().kernel;
  const int64_t kc = p.la.kc, Kp = p.la.Kp;
  const int64_t nc = panelColumns(kc);
  const int64_t jEnd = std::min(p.N, js1 * kNr);
  const bool perStripEpilogue = p.ep && !gemmEpilogueIsInline(*p.ep);
  for (int64_t j0 = js0 * kNr; j0 < jEnd; j0 += nc) {
    const int64_t j1 = std::min(j0 + nc, jEnd);
    for (int64_t k0 = 0; k0 < Kp; k0 += kc) {
      const int64_t pairs = p.la.pairsIn(k0);
      const bool accumulate = k0 > 0 || p.accumulateC;
      const GemmEpilogue* ep = k0 + kc >= Kp ? p.ep : nullptr;
      for (int64_t is = is0; is < is1; ++is) {
        const int64_t i = is * kMr, rows = std::min(kMr, p.M - i);
        const uint32_t* aStrip = p.a + p.la.stripOffset(k0, is);
        float* cRow = p.C + i * p.ldc;
        for (int64_t j = j0; j < j1; j += kNr) {
          const int64_t cols = std::min(kNr, j1 - j);
          kernel(pairs, aStrip, p.b + p.lb.stripOffset(k0, j / kNr), cRow + j, p.ldc, rows, cols,
                 accumulate);
          if (ep && !perStripEpilogue) applyGemmEpilogue(*ep, cRow + j, p.ldc, rows, cols, i, j);
        }
        if (ep && perStripEpilogue) applyGemmEpilogue(*ep, cRow + j0, p.ldc, rows, j1 - j0, i, j0);
      }
    }
  }
}

constexpr int64_t kMinParallelWork = int64_t{1} << 18;  // M*N*K below which one thread is faster

// Splits C over the current pool along the dimension with more strips.
void multiply(const Problem& p) {
  const int64_t mStrips = p.la.strips(), nStrips = p.lb.strips();
  ThreadPool* pool = currentThreadPool();
  if (!pool || pool->size() == 1 || p.M * p.N * p.la.K < kMinParallelWork ||
      std::max(mStrips, nStrips) < 2) {
    multiplyRange(p, 0, mStrips, 0, nStrips);
  } else if (nStrips >= mStrips) {
    pool->parallelFor(nStrips,
                      [&](int64_t t0, int64_t t1) { multiplyRange(p, 0, mStrips, t0, t1); });
  } else {
    pool->parallelFor(mStrips,
                      [&](int64_t t0, int64_t t1) { multiplyRange(p, t0, t1, 0, nStrips); });
  }
}

// Packs a run-time operand whole into `dst`, strips shared by the pool's threads.
void packRuntime(const Layout& l, bool isA, bool trans, const float* X, int64_t ld, uint32_t* dst) {
  ThreadPool* pool = currentThreadPool();
  if (!pool || pool->size() == 1 || l.outer * l.K < kMinParallelWork / 16) {
    packStripsRuntime(l, isA, trans, X, ld, 0, l.strips(), dst);
    return;
  }
  pool->parallelFor(l.strips(), [&](int64_t s0, int64_t s1) {
    packStripsRuntime(l, isA, trans, X, ld, s0, s1, dst);
  });
}

// beta other than 0 and 1 applied to C beforehand; returns whether C is then accumulated into.
bool applyBeta(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  if (beta == 0.0f) return false;
  if (beta != 1.0f) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] *= beta;
  }
  return true;
}

// C = epilogue(beta * C) when there is no product to add; true when that was the case.
bool handleDegenerate(int64_t M, int64_t N, int64_t K, float beta, float* C, int64_t ldc,
                      const GemmEpilogue* ep) {
  if (M <= 0 || N <= 0) return true;
  if (K > 0) return false;
  if (!applyBeta(M, N, beta, C, ldc)) {
    for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, 0.0f);
  }
  if (ep) applyGemmEpilogue(*ep, C, ldc, M, N, 0, 0);
  return true;
}

}  // namespace

bool bf16GemmSupported() { return cpuSupports(CpuIsa::kAvx512Bf16); }

int64_t bf16GemmDepthBlock() {
  static const int64_t kc = depthBlockFromCaches();
  return kc;
}

int64_t PackedBf16Matrix::packedWords(Side side, int64_t rows, int64_t cols) {
  const bool isA = side == Side::kA;
  return Layout(isA ? rows : cols, isA ? cols : rows, 2, isA ? kMr : kNr).words();
}

PackedBf16Matrix PackedBf16Matrix::view(Side side, int64_t rows, int64_t cols, int64_t kc,
                                        std::shared_ptr<const uint32_t> data) {
  PackedBf16Matrix m;
  m.data_ = std::move(data);
  m.side_ = side;
  m.rows_ = rows;
  m.cols_ = cols;
  m.kc_ = kc;
  m.words_ = packedWords(side, rows, cols);
  return m;
}

PackedBf16Matrix packBf16(PackedBf16Matrix::Side side, bool trans, int64_t outer, int64_t K,
                          const float* X, int64_t ld) {
  const bool isA = side == PackedBf16Matrix::Side::kA;
  const Layout l(outer, K, bf16GemmDepthBlock(), isA ? kMr : kNr);
  std::shared_ptr<float> storage = allocateSharedFloats(std::max<int64_t>(l.words(), 1));
  int64_t outerStride = 0, depthStride = 0;
  operandStrides(isA, trans, ld, &outerStride, &depthStride);
  auto* words = reinterpret_cast<uint32_t*>(storage.get());
  if (outer > 0) packStripsScalar(l, X, outerStride, depthStride, 0, l.strips(), words);
  PackedBf16Matrix m;
  m.data_ = std::shared_ptr<const uint32_t>(storage, words);
  m.side_ = side;
  m.rows_ = isA ? outer : K;
  m.cols_ = isA ? K : outer;
  m.kc_ = l.kc;
  m.words_ = l.words();
  return m;
}

PackedBf16Matrix packBf16A(bool transA, int64_t M, int64_t K, const float* A, int64_t lda) {
  return packBf16(PackedBf16Matrix::Side::kA, transA, M, K, A, lda);
}

PackedBf16Matrix packBf16B(bool transB, int64_t K, int64_t N, const float* B, int64_t ldb) {
  return packBf16(PackedBf16Matrix::Side::kB, transB, N, K, B, ldb);
}

uint64_t bf16GemmWorkspaceBytes(const PackedBf16Matrix& packed, int64_t other) {
  const bool packedB = packed.side() == PackedBf16Matrix::Side::kB;
  const int64_t K = packedB ? packed.rows() : packed.cols();
  const Layout runtime(other, K, packed.depthBlock(), packedB ? kMr : kNr);
  return static_cast<uint64_t>(runtime.words()) * sizeof(uint32_t);
}

void bf16GemmPacked(bool transA, int64_t M, const float* A, int64_t lda, const PackedBf16Matrix& B,
                    float beta, float* C, int64_t ldc, void* workspace,
                    const GemmEpilogue& epilogue) {
  const int64_t K = B.rows(), N = B.cols();
  const GemmEpilogue* ep = epilogue.empty() ? nullptr : &epilogue;
  if (handleDegenerate(M, N, K, beta, C, ldc, ep)) return;
  Problem p{nullptr,
            B.data(),
            Layout(M, K, B.depthBlock(), kMr),
            Layout(N, K, B.depthBlock(), kNr),
            M,
            N,
            C,
            ldc,
            applyBeta(M, N, beta, C, ldc),
            ep};
  auto* packedA = static_cast<uint32_t*>(workspace);
  packRuntime(p.la, true, transA, A, lda, packedA);
  p.a = packedA;
  multiply(p);
}

void bf16GemmPacked(const PackedBf16Matrix& A, int64_t N, bool transB, const float* B, int64_t ldb,
                    float beta, float* C, int64_t ldc, void* workspace,
                    const GemmEpilogue& epilogue) {
  const int64_t M = A.rows(), K = A.cols();
  const GemmEpilogue* ep = epilogue.empty() ? nullptr : &epilogue;
  if (handleDegenerate(M, N, K, beta, C, ldc, ep)) return;
  Problem p{A.data(),
            nullptr,
            Layout(M, K, A.depthBlock(), kMr),
            Layout(N, K, A.depthBlock(), kNr),
            M,
            N,
            C,
            ldc,
            applyBeta(M, N, beta, C, ldc),
            ep};
  auto* packedB = static_cast<uint32_t*>(workspace);
  packRuntime(p.lb, false, transB, B, ldb, packedB);
  p.b = packedB;
  multiply(p);
}

}  // namespace kiln::cpu
