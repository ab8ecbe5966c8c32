// The matrix-vector paths of sgemm (backends/cpu/gemm/sgemv.cpp): M == 1 and N == 1 through
// sgemm, and M == 1 through sgemmPacked (a classifier's Gemm on one image), against referenceGemm
// in double. Sizes are not multiples of the vector width or of the packed strips, both layouts of
// each operand, alpha / beta / bias / activation epilogues, on one and two threads (the larger
// sizes are split over the threads).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "activation_reference.h"
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/thread_pool.h"
#include "guarded_workspace.h"
#include "random_data.h"

namespace kiln::cpu {
namespace {

using kiln::testing::randomFloats;
using testing::activationReference;

std::vector<double> toDouble(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

struct GemvCase {
  int64_t M, N, K;
  bool transA, transB;
  float alpha, beta;
};

std::string describe(const GemvCase& c) {
  return std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) +
         (c.transA ? " transA" : "") + (c.transB ? " transB" : "") + " alpha " +
         std::to_string(c.alpha) + " beta " + std::to_string(c.beta);
}

// C = ep(alpha * op(A) op(B) + beta * C0), in double; bias per column (M == 1) or per row.
std::vector<double> expected(const GemvCase& c, const std::vector<float>& a,
                             const std::vector<float>& b, const std::vector<float>& c0,
                             const GemmEpilogue& ep) {
  const int64_t lda = c.transA ? c.M : c.K, ldb = c.transB ? c.K : c.N;
  std::vector<double> out = toDouble(c0);
  referenceGemm<double>(c.transA, c.transB, c.M, c.N, c.K, c.alpha, toDouble(a).data(), lda,
                        toDouble(b).data(), ldb, c.beta, out.data(), c.N);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      double& v = out[static_cast<size_t>(i * c.N + j)];
      if (ep.bias) v += ep.bias[ep.biasPerRow ? i : j];
      v = activationReference(ep.activation, v);
    }
  return out;
}

void expectClose(const std::vector<float>& got, const std::vector<double>& want, int64_t K) {
  ASSERT_EQ(got.size(), want.size());
  const double tolerance = 2e-6 * std::sqrt(double(K));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tolerance * (1.0 + std::fabs(want[i]))) << "at " << i;
  }
}

std::vector<GemvCase> cases() {
  std::vector<GemvCase> out;
  const std::vector<std::pair<int64_t, int64_t>> sizes{
      {1, 1}, {1, 7}, {5, 1}, {33, 37}, {100, 300}, {1000, 1280}, {257, 513}};
  for (const auto& [n, k] : sizes) {
    for (bool transA : {false, true}) {
      for (bool transB : {false, true}) {
        out.push_back({1, n, k, transA, transB, 1.0f, 0.0f});  // row vector times a matrix
        out.push_back({n, 1, k, transA, transB, 1.0f, 0.0f});  // a matrix times a column vector
      }
    }
    out.push_back({1, n, k, false, true, 0.5f, 1.0f});
    out.push_back({1, n, k, true, false, -1.5f, -0.7f});
    out.push_back({n, 1, k, false, false, 2.0f, 0.25f});
  }
  return out;
}

class Sgemv : public ::testing::TestWithParam<int> {};

TEST_P(Sgemv, MatchesReferenceGemm) {
  ThreadPool pool(GetParam());
  ThreadPoolScope scope(GetParam() > 1 ? &pool : nullptr);
  for (const GemvCase& c : cases()) {
    SCOPED_TRACE(describe(c));
    const std::vector<float> a = randomFloats(c.M * c.K, 1), b = randomFloats(c.K * c.N, 2);
    // With beta == 0, C must not be read: NaNs there must not reach the result.
    const std::vector<float> c0 =
        c.beta == 0.0f ? std::vector<float>(c.M * c.N, std::numeric_limits<float>::quiet_NaN())
                       : randomFloats(c.M * c.N, 3);
    std::vector<float> got = c0;
    const kiln::testing::GuardedWorkspace ws(sgemmWorkspaceBytes(c.M, c.N, c.K, poolThreads()));
    sgemm(c.transA, c.transB, c.M, c.N, c.K, c.alpha, a.data(), c.transA ? c.M : c.K, b.data(),
          c.transB ? c.K : c.N, c.beta, got.data(), c.N, ws.data());
    ASSERT_TRUE(ws.intact()) << "wrote past sgemmWorkspaceBytes";
    const std::vector<float> zero(c.M * c.N, 0.0f);
    expectClose(got, expected(c, a, b, c.beta == 0.0f ? zero : c0, GemmEpilogue{}), c.K);
  }
}

TEST_P(Sgemv, EpilogueBiasAndActivation) {
  ThreadPool pool(GetParam());
  ThreadPoolScope scope(GetParam() > 1 ? &pool : nullptr);
  for (ActivationKind kind :
       {ActivationKind::kNone, ActivationKind::kRelu, ActivationKind::kSiLU}) {
    for (const GemvCase& c : {GemvCase{1, 1000, 1280, false, true, 1.0f, 0.0f},
                              GemvCase{1, 45, 70, true, false, 0.5f, 1.0f},
                              GemvCase{67, 1, 300, false, false, 1.0f, 0.0f}}) {
      SCOPED_TRACE(describe(c) + " " + activationName(kind));
      const std::vector<float> a = randomFloats(c.M * c.K, 4), b = randomFloats(c.K * c.N, 5);
      const std::vector<float> bias = randomFloats(std::max(c.M, c.N), 6),
                               c0 = randomFloats(c.M * c.N, 7);
      GemmEpilogue ep;
      ep.bias = bias.data();
      ep.biasPerRow = c.N == 1;
      ep.activation.kind = kind;
      std::vector<float> got = c0;
      const kiln::testing::GuardedWorkspace ws(sgemmWorkspaceBytes(c.M, c.N, c.K, poolThreads()));
      sgemm(c.transA, c.transB, c.M, c.N, c.K, c.alpha, a.data(), c.transA ? c.M : c.K, b.data(),
            c.transB ? c.K : c.N, c.beta, got.data(), c.N, ws.data(), ep);
      ASSERT_TRUE(ws.intact()) << "wrote past sgemmWorkspaceBytes";
      expectClose(got,
                  expected(c, a, b, c.beta == 0.0f ? std::vector<float>(c0.size(), 0.0f) : c0, ep),
                  c.K);
    }
  }
}

// M == 1 on a B packed once (Gemm and MatMul with constant weights), every packing layout: the
// AVX2 kernel's 16-column strips and, on a CPU with AVX-512, that kernel's 32-column ones (which
// its own matrix-vector loop reads).
TEST_P(Sgemv, PackedWeightsOneRow) {
  ThreadPool pool(GetParam());
  ThreadPoolScope scope(GetParam() > 1 ? &pool : nullptr);
  std::vector<CpuIsa> isas = {CpuIsa::kAvx2};
  if (cpuSupports(CpuIsa::kAvx512)) isas.push_back(CpuIsa::kAvx512);
  for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {7, 3}, {33, 300}, {1000, 1280}, {50, 1000}}) {
    for (bool transA : {false, true}) {
      for (bool transB : {false, true}) {
        for (CpuIsa isa : isas) {
          const GemvCase c{1, n, k, transA, transB, transA ? 0.75f : 1.0f, transB ? 0.0f : 1.0f};
          SCOPED_TRACE(describe(c) + " " + cpuIsaName(isa));
          const std::vector<float> a = randomFloats(k, 8), b = randomFloats(k * n, 9),
                                   bias = randomFloats(n, 10);
          const std::vector<float> c0 =
              c.beta == 0.0f ? std::vector<float>(n, std::numeric_limits<float>::quiet_NaN())
                             : randomFloats(n, 11);
          const PackedMatrix packed = packB(transB, k, n, b.data(), transB ? k : n, isa);
          GemmEpilogue ep;
          ep.bias = bias.data();
          ep.activation.kind = ActivationKind::kRelu;
          std::vector<float> got = c0;
          // lda: A is 1 x K (stride K) or, transposed, K x 1 (stride 1).
          const kiln::testing::GuardedWorkspace ws(sgemmWorkspaceBytes(packed, 1, poolThreads()));
          sgemmPacked(transA, 1, c.alpha, a.data(), transA ? 1 : k, packed, c.beta, got.data(), n,
                      ws.data(), ep);
          ASSERT_TRUE(ws.intact()) << "wrote past sgemmWorkspaceBytes";
          expectClose(got, expected(c, a, b, c.beta == 0.0f ? std::vector<float>(n, 0.0f) : c0, ep),
                      k);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, Sgemv, ::testing::Values(1, 2),
                         [](const auto& info) { return "threads" + std::to_string(info.param); });

}  // namespace
}  // namespace kiln::cpu
