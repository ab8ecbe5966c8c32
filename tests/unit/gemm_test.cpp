// sgemm against a naive triple loop over edge shapes, transposes, alpha and beta, on every ISA
// path this CPU has, on one and two threads; pre-packed operands and fused epilogues against the
// same loop followed by the epilogue written out with std:: functions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <random>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/thread_pool.h"
#include "core/half.h"
#include "guarded_workspace.h"
#include "ir/op_schema.h"
#include "kiln/session.h"
#include "model_builder.h"

namespace kiln::cpu {
namespace {

std::vector<float> randomMatrix(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

void naiveGemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
               const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
               int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < K; ++k) {
        const float a = transA ? A[k * lda + i] : A[i * lda + k];
        const float b = transB ? B[j * ldb + k] : B[k * ldb + j];
        sum += static_cast<double>(a) * b;
      }
      float& c = C[i * ldc + j];
      c = static_cast<float>(alpha * sum + (beta == 0.0f ? 0.0 : beta * static_cast<double>(c)));
    }
  }
}

void checkCase(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, float beta,
               int64_t pad, std::mt19937& rng) {
  // Leading dimensions larger than the logical width exercise the strides.
  const int64_t lda = (transA ? M : K) + pad;
  const int64_t ldb = (transB ? K : N) + pad;
  const int64_t ldc = N + pad;
  std::vector<float> A = randomMatrix((transA ? K : M) * lda, rng);
  std::vector<float> B = randomMatrix((transB ? N : K) * ldb, rng);
  std::vector<float> C = randomMatrix(M * ldc, rng);
  if (beta == 0.0f) std::fill(C.begin(), C.end(), std::nanf(""));  // must not be read
  std::vector<float> expected = C;
  naiveGemm(transA, transB, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, expected.data(),
            ldc);
  const kiln::testing::GuardedWorkspace ws(sgemmWorkspaceBytes(M, N, K, poolThreads()));
  sgemm(transA, transB, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc,
        ws.data());
  ASSERT_TRUE(ws.intact()) << "sgemm wrote past sgemmWorkspaceBytes for M=" << M << " N=" << N
                           << " K=" << K;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      const float e = expected[i * ldc + j];
      const float g = C[i * ldc + j];
      ASSERT_NEAR(g, e, 1e-4f * (1.0f + std::fabs(e)) * std::sqrt(static_cast<float>(K) + 1.0f))
          << "M=" << M << " N=" << N << " K=" << K << " transA=" << transA << " transB=" << transB
          << " alpha=" << alpha << " beta=" << beta << " at (" << i << "," << j << ")";
    }
  }
}

// Runs fn once per ISA path this CPU has (AVX2 forced, then AVX-512 when present), naming it on
// failure.
void forEachIsa(const std::function<void()>& fn) {
  std::vector<CpuIsa> isas = {CpuIsa::kAvx2};
  if (detectedCpuIsa() == CpuIsa::kAvx512) isas.push_back(CpuIsa::kAvx512);
  for (CpuIsa isa : isas) {
    SCOPED_TRACE(cpuIsaName(isa));
    ScopedCpuIsaLimit limit(isa);
    ASSERT_EQ(activeCpuIsa(), isa);
    fn();
  }
}

TEST(CpuIsa, LimitCapsTheDetectedIsa) {
  const CpuIsa detected = detectedCpuIsa();
  {
    ScopedCpuIsaLimit limit(CpuIsa::kAvx2);
    EXPECT_EQ(activeCpuIsa(), CpuIsa::kAvx2);
  }
  EXPECT_EQ(activeCpuIsa(), detected);
  ScopedCpuIsaLimit above(CpuIsa::kAvx512);  // cannot raise the ISA beyond the CPU's
  EXPECT_EQ(activeCpuIsa(), detected);
}

TEST(Sgemm, MatchesNaiveOnEdgeShapes) {
  forEachIsa([] {
    std::mt19937 rng(42);
    const int64_t sizes[] = {1, 2, 5, 7, 14, 15, 16, 17, 31, 33, 100};
    for (int64_t M : sizes) {
      for (int64_t N : sizes) {
        for (int64_t K : {1, 7, 17, 33}) {
          for (int t = 0; t < 4; ++t) checkCase(t & 1, t & 2, M, N, K, 1.0f, 0.0f, 0, rng);
        }
      }
    }
  });
}

TEST(Sgemm, AlphaBetaAndStrides) {
  forEachIsa([] {
    std::mt19937 rng(7);
    const float scalars[][2] = {
        {1.0f, 1.0f}, {0.5f, 2.0f}, {-1.5f, 0.0f}, {0.0f, 0.25f}, {2.0f, -1.0f}};
    for (const auto& ab : scalars) {
      for (int t = 0; t < 4; ++t) {
        checkCase(t & 1, t & 2, 17, 33, 7, ab[0], ab[1], 3, rng);
        checkCase(t & 1, t & 2, 100, 5, 33, ab[0], ab[1], 1, rng);
        checkCase(t & 1, t & 2, 1, 40, 70, ab[0], ab[1], 2, rng);  // row-vector path
        checkCase(t & 1, t & 2, 37, 1, 20, ab[0], ab[1], 2, rng);  // column-vector path
      }
    }
  });
}

TEST(Sgemm, CrossesEveryBlockBoundary) {
  forEachIsa([] {
    std::mt19937 rng(3);
    // K > 256, M > 504 and N > 2048 each split into several packed blocks.
    checkCase(false, false, 150, 2060, 300, 1.0f, 0.5f, 0, rng);
    checkCase(true, true, 151, 40, 520, 0.75f, 1.0f, 2, rng);
    checkCase(false, true, 520, 33, 257, 1.0f, 0.0f, 1, rng);
  });
}

// Every remainder of M modulo the row tile (14 for AVX-512, 6 for AVX2): a short last strip is
// merged with the one before it and the two split evenly (128 rows: 8 strips of 14, then 8 + 8),
// as is one at the end of the last mc block (M = 520: a block of 504 rows, then 16).
TEST(Sgemm, EveryRowRemainder) {
  forEachIsa([] {
    std::mt19937 rng(21);
    for (int64_t M = 112; M < 142; ++M) checkCase(M % 2 == 1, false, M, 40, 30, 1.0f, 0.0f, 1, rng);
    checkCase(false, false, 520, 70, 40, 0.5f, 1.0f, 0, rng);
    checkCase(true, true, 520, 33, 20, 1.0f, 0.0f, 2, rng);
  });
}

TEST(Sgemm, TwoThreadsMatchNaive) {
  ThreadPool pool(2);
  ThreadPoolScope scope(&pool);
  forEachIsa([] {
    std::mt19937 rng(11);
    for (int t = 0; t < 4; ++t) {
      checkCase(t & 1, t & 2, 257, 33, 129, 1.0f, 0.0f, 0, rng);  // split over rows
      checkCase(t & 1, t & 2, 33, 257, 129, 0.5f, 1.0f, 2, rng);  // split over columns
      checkCase(t & 1, t & 2, 128, 200, 300, -1.0f, 0.5f, 1, rng);
    }
  });
}

// Both operands plain and more row tiles than column tiles: the two threads pack op(B) together
// (half the strips each), whole when it is at most 4 MiB packed, else one kc x nc panel at a
// time, and multiply their own rows by it; several kc and nc blocks, a partial last strip and
// beta = 1 check that every panel lands in place.
TEST(Sgemm, TwoThreadsShareBPanelsAcrossBlocks) {
  ThreadPool pool(2);
  ThreadPoolScope scope(&pool);
  forEachIsa([] {
    std::mt19937 rng(12);
    checkCase(false, false, 600, 1030, 530, 1.0f, 0.0f, 0, rng);
    checkCase(true, true, 700, 45, 300, -0.5f, 1.0f, 3, rng);
    checkCase(false, true, 300, 17, 40, 2.0f, 0.25f, 1, rng);  // one narrow strip for two threads
    checkCase(false, false, 30, 32, 33000, 1.0f, 0.5f, 0,
              rng);  // 33000 x 32 packed: panel by panel
    checkCase(true, true, 31, 20, 53000, 0.5f, 0.0f, 1, rng);
  });
}

// The activations written out with std:: functions (what ONNX defines them as).
float referenceActivation(const Activation& a, float x) {
  switch (a.kind) {
    case ActivationKind::kNone:
      return x;
    case ActivationKind::kRelu:
      return std::max(x, 0.0f);
    case ActivationKind::kClip:
      return std::min(std::max(x, a.alpha), a.beta);
    case ActivationKind::kLeakyRelu:
      return x < 0 ? a.alpha * x : x;
    case ActivationKind::kSigmoid:
      return 1.0f / (1.0f + std::exp(-x));
    case ActivationKind::kHardSigmoid:
      return std::min(1.0f, std::max(0.0f, a.alpha * x + a.beta));
    case ActivationKind::kHardSwish:
      return x * std::min(1.0f, std::max(0.0f, x / 6.0f + 0.5f));
    case ActivationKind::kSiLU:
      return x / (1.0f + std::exp(-x));
    case ActivationKind::kGelu:
      return 0.5f * x * (1.0f + std::erf(x / std::sqrt(2.0f)));
  }
  return x;
}

struct EpilogueCase {
  Activation act;
  bool bias, biasPerRow, residual;
};

// C = epilogue(alpha * op(A) * op(B) + beta * C) through packB + sgemmPacked, packA +
// sgemmPacked and sgemm with an epilogue, each against naive + the reference epilogue; and
// through packBHalf + sgemmPackedHalf against the same with B rounded to half precision first.
void checkPackedCase(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                     float beta, const EpilogueCase& e, std::mt19937& rng) {
  const int64_t lda = transA ? M : K, ldb = transB ? K : N, ldc = N + 1, ldr = N + 2;
  const std::vector<float> A = randomMatrix(M * K, rng), B = randomMatrix(K * N, rng);
  const std::vector<float> C0 = randomMatrix(M * ldc, rng);
  const std::vector<float> bias = randomMatrix(e.biasPerRow ? M : N, rng),
                           residual = randomMatrix(M * ldr, rng);
  GemmEpilogue ep;
  ep.bias = e.bias ? bias.data() : nullptr;
  ep.biasPerRow = e.biasPerRow;
  ep.activation = e.act;
  ep.residual = e.residual ? residual.data() : nullptr;
  ep.ldResidual = ldr;
  auto expectedWith = [&](const std::vector<float>& b) {
    std::vector<float> out = C0;
    naiveGemm(transA, transB, M, N, K, alpha, A.data(), lda, b.data(), ldb, beta, out.data(), ldc);
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        float v = out[i * ldc + j];
        if (e.bias) v += e.biasPerRow ? bias[i] : bias[j];
        if (e.residual) v += residual[i * ldr + j];
        out[i * ldc + j] = referenceActivation(e.act, v);
      }
    }
    return out;
  };
  std::vector<float> expected = expectedWith(B);
  auto initialC = [&] {
    std::vector<float> C = C0;
    if (beta == 0.0f) std::fill(C.begin(), C.end(), std::nanf(""));
    return C;
  };
  auto compare = [&](const std::vector<float>& C, const char* path) {
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        const float x = expected[i * ldc + j], g = C[i * ldc + j];
        ASSERT_NEAR(g, x, 2e-4f * (1.0f + std::fabs(x)) * std::sqrt(static_cast<float>(K) + 1.0f))
            << path << " M=" << M << " N=" << N << " K=" << K << " transA=" << transA
            << " transB=" << transB << " activation=" << activationName(e.act.kind) << " at (" << i
            << "," << j << ")";
      }
    }
  };
  std::vector<float> C = initialC();
  const PackedMatrix pb = packB(transB, K, N, B.data(), ldb);
  const kiln::testing::GuardedWorkspace wsB(sgemmWorkspaceBytes(pb, M, poolThreads()));
  sgemmPacked(transA, M, alpha, A.data(), lda, pb, beta, C.data(), ldc, wsB.data(), ep);
  ASSERT_TRUE(wsB.intact()) << "packB workspace overrun";
  compare(C, "packB");
  C = initialC();
  const PackedMatrix pa = packA(transA, M, K, A.data(), lda);
  const kiln::testing::GuardedWorkspace wsA(sgemmWorkspaceBytes(pa, N, poolThreads()));
  sgemmPacked(pa, N, alpha, transB, B.data(), ldb, beta, C.data(), ldc, wsA.data(), ep);
  ASSERT_TRUE(wsA.intact()) << "packA workspace overrun";
  compare(C, "packA");
  C = initialC();
  const kiln::testing::GuardedWorkspace ws(sgemmWorkspaceBytes(M, N, K, poolThreads()));
  sgemm(transA, transB, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc,
        ws.data(), ep);
  ASSERT_TRUE(ws.intact()) << "sgemm+epilogue workspace overrun";
  compare(C, "sgemm+epilogue");
  std::vector<float> halfB = B;
  for (float& v : halfB) v = halfBitsToFloat(floatToHalfBits(v));
  expected = expectedWith(halfB);
  C = initialC();
  const PackedHalfMatrix ph = packBHalf(transB, K, N, B.data(), ldb);
  ASSERT_EQ(ph.values(), pb.floats());
  const kiln::testing::GuardedWorkspace wsH(sgemmWorkspaceBytes(ph, M, poolThreads()));
  sgemmPackedHalf(transA, M, alpha, A.data(), lda, ph, beta, C.data(), ldc, wsH.data(), ep);
  ASSERT_TRUE(wsH.intact()) << "packBHalf workspace overrun";
  compare(C, "packBHalf");
}

TEST(SgemmPacked, EveryActivationWithBiasAndResidual) {
  const Activation acts[] = {
      {ActivationKind::kNone, 0, 0},        {ActivationKind::kRelu, 0, 0},
      {ActivationKind::kClip, -0.5f, 0.7f}, {ActivationKind::kLeakyRelu, 0.1f, 0},
      {ActivationKind::kSigmoid, 0, 0},     {ActivationKind::kHardSigmoid, 0.2f, 0.5f},
      {ActivationKind::kHardSwish, 0, 0},   {ActivationKind::kSiLU, 0, 0},
      {ActivationKind::kGelu, 0, 0},
  };
  forEachIsa([&] {
    std::mt19937 rng(5);
    for (const Activation& act : acts) {
      checkPackedCase(false, false, 33, 47, 65, 1.0f, 0.0f, {act, true, false, true}, rng);
      checkPackedCase(true, true, 17, 70, 33, 0.5f, 1.0f, {act, true, true, false}, rng);
    }
  });
}

// Activations that activation.h applies row by row run once per A strip across a column panel
// (nc = 1024 columns on AVX-512): two panels, two depth blocks and a split last strip.
TEST(SgemmPacked, RowByRowActivationAcrossColumnPanels) {
  forEachIsa([] {
    std::mt19937 rng(19);
    const EpilogueCase gelu{{ActivationKind::kGelu, 0, 0}, true, false, true};
    const EpilogueCase sigmoid{{ActivationKind::kSigmoid, 0, 0}, true, true, false};
    checkPackedCase(false, false, 30, 1100, 300, 1.0f, 0.0f, gelu, rng);
    checkPackedCase(true, false, 17, 1030, 40, 0.5f, 1.0f, sigmoid, rng);
  });
}

TEST(SgemmPacked, EdgeShapesTransposesAndScalars) {
  forEachIsa([] {
    std::mt19937 rng(9);
    const EpilogueCase relu{{ActivationKind::kRelu, 0, 0}, true, false, true};
    const EpilogueCase none{{ActivationKind::kNone, 0, 0}, false, false, false};
    for (int64_t M : {1, 7, 17, 33}) {
      for (int64_t N : {1, 7, 17, 33}) {
        for (int64_t K : {1, 17, 257}) {
          for (int t = 0; t < 4; ++t) {
            checkPackedCase(t & 1, t & 2, M, N, K, 1.0f, 0.0f, relu, rng);
            checkPackedCase(t & 1, t & 2, M, N, K, -0.5f, 2.0f, none, rng);
          }
        }
      }
    }
  });
}

TEST(SgemmPacked, LargeShapesOnTwoThreads) {
  ThreadPool pool(2);
  ThreadPoolScope scope(&pool);
  forEachIsa([] {
    std::mt19937 rng(13);
    const EpilogueCase gelu{{ActivationKind::kGelu, 0, 0}, true, false, true};
    const EpilogueCase convLike{{ActivationKind::kRelu, 0, 0}, true, true, true};
    checkPackedCase(false, false, 128, 300, 520, 1.0f, 0.0f, gelu, rng);
    checkPackedCase(false, false, 64, 700, 300, 1.0f, 0.0f, convLike, rng);
    checkPackedCase(true, false, 530, 40, 100, 1.0f, 1.0f, convLike, rng);
  });
}

TEST(SgemmPacked, KeepsTheIsaItWasPackedFor) {
  // Weights packed while AVX-512 was active still multiply correctly after the limit drops to AVX2.
  std::mt19937 rng(17);
  const int64_t M = 20, N = 40, K = 50;
  const std::vector<float> A = randomMatrix(M * K, rng), B = randomMatrix(K * N, rng);
  const PackedMatrix packed = packB(false, K, N, B.data(), N);
  EXPECT_EQ(packed.isa(), detectedCpuIsa());
  EXPECT_EQ(packed.rows(), K);
  EXPECT_EQ(packed.cols(), N);
  ScopedCpuIsaLimit limit(CpuIsa::kAvx2);
  std::vector<float> C(M * N), expected(M * N);
  const kiln::testing::GuardedWorkspace ws(sgemmWorkspaceBytes(packed, M, poolThreads()));
  sgemmPacked(false, M, 1.0f, A.data(), K, packed, 0.0f, C.data(), N, ws.data());
  naiveGemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, expected.data(), N);
  for (int64_t i = 0; i < M * N; ++i) ASSERT_NEAR(C[i], expected[i], 1e-4f * std::sqrt(float(K)));
}

TEST(SgemmPacked, EmptyDepthGivesTheEpilogueOfBetaC) {
  GemmEpilogue ep;
  const float bias[2] = {1.0f, -10.0f};
  ep.bias = bias;
  ep.activation = {ActivationKind::kRelu, 0, 0};
  std::vector<float> C = {1.0f, 2.0f, 3.0f, 4.0f};
  EXPECT_EQ(sgemmWorkspaceBytes(2, 2, 0, 1), 0u);
  sgemm(false, false, 2, 2, 0, 1.0f, nullptr, 0, nullptr, 2, 2.0f, C.data(), 2, nullptr, ep);
  EXPECT_EQ(C, (std::vector<float>{3.0f, 0.0f, 7.0f, 0.0f}));
}

TEST(Sgemm, EmptyDepthScalesC) {
  std::vector<float> C = {1.0f, 2.0f, 3.0f, 4.0f};
  sgemm(false, false, 2, 2, 0, 1.0f, nullptr, 0, nullptr, 2, 3.0f, C.data(), 2, nullptr);
  EXPECT_EQ(C, (std::vector<float>{3.0f, 6.0f, 9.0f, 12.0f}));
}

TEST(Sgemm, ReportsSpeedOn512Cube) {
  const int64_t n = 512;
  std::mt19937 rng(1);
  std::vector<float> A = randomMatrix(n * n, rng), B = randomMatrix(n * n, rng), C(n * n);
  ScratchFloats scratch;
  void* ws = scratch.getBytes(sgemmWorkspaceBytes(n, n, n, 1));
  sgemm(false, false, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(), n, ws);  // warm-up
  const int reps = 5;
  // CPU time rather than wall time: the figure stays meaningful on a loaded machine.
  const std::clock_t start = std::clock();
  for (int r = 0; r < reps; ++r)
    sgemm(false, false, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(), n, ws);
  const double seconds = static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
  const double gflops = 2.0 * n * n * n * reps / seconds * 1e-9;
  std::printf("sgemm 512^3 single thread: %.1f GFLOP/s\n", gflops);
  SUCCEED();
}

// Gemm (transB, alpha, beta, a constant one-row C) and MatMul (3-D A) with constant weights:
// the kernels pack B when the session is built; results against the naive loop.
TEST(SgemmPacked, GemmAndMatMulKernelsWithConstantWeights) {
  std::mt19937 rng(21);
  const int64_t M = 37, K = 70, N = 45;
  const std::vector<float> A = randomMatrix(M * K, rng), Bt = randomMatrix(N * K, rng),
                           C = randomMatrix(N, rng);
  const std::vector<float> W = randomMatrix(K * N, rng);
  onnx::ModelProto model = testing::makeModel(13);
  auto* graph = model.mutable_graph();
  testing::addInput(model, "a", {M, K});
  testing::addInput(model, "x", {2, M, K});
  testing::addFloatInitializer(model, "bt", {N, K}, Bt);
  testing::addFloatInitializer(model, "c", {N}, C);
  testing::addFloatInitializer(model, "w", {K, N}, W);
  auto* gemm = graph->add_node();
  gemm->set_op_type("Gemm");
  for (const char* in : {"a", "bt", "c"}) gemm->add_input(in);
  gemm->add_output("y");
  const std::pair<const char*, float> floats[] = {{"alpha", 0.5f}, {"beta", 2.0f}};
  for (const auto& [name, value] : floats) {
    auto* attr = gemm->add_attribute();
    attr->set_name(name);
    attr->set_type(onnx::AttributeProto::FLOAT);
    attr->set_f(value);
  }
  auto* transB = gemm->add_attribute();
  transB->set_name("transB");
  transB->set_type(onnx::AttributeProto::INT);
  transB->set_i(1);
  auto* matmul = graph->add_node();
  matmul->set_op_type("MatMul");
  matmul->add_input("x");
  matmul->add_input("w");
  matmul->add_output("z");
  testing::addOutput(model, "y", {M, N});
  testing::addOutput(model, "z", {2, M, N});
  const auto dir = testing::tempDir("packed_gemm");
  Session session(testing::saveModel(model, dir / "model.onnx"));
  std::vector<float> X = A;
  X.insert(X.end(), A.rbegin(), A.rend());
  const NamedTensors out =
      session.run({{"a", Tensor::fromVector<float>(DataType::kFloat32, {M, K}, A)},
                   {"x", Tensor::fromVector<float>(DataType::kFloat32, {2, M, K}, X)}});
  std::vector<float> expectedY(M * N), expectedZ(2 * M * N);
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) expectedY[i * N + j] = 2.0f * C[j];
  }
  naiveGemm(false, true, M, N, K, 0.5f, A.data(), K, Bt.data(), K, 1.0f, expectedY.data(), N);
  naiveGemm(false, false, 2 * M, N, K, 1.0f, X.data(), K, W.data(), N, 0.0f, expectedZ.data(), N);
  ASSERT_EQ(out.size(), 2u);
  const Tensor& y = out[0].second;
  const Tensor& z = out[1].second;
  ASSERT_EQ(y.numel(), M * N);
  ASSERT_EQ(z.numel(), 2 * M * N);
  for (int64_t i = 0; i < M * N; ++i)
    ASSERT_NEAR(y.data<float>()[i], expectedY[i], 1e-4f * (1 + std::fabs(expectedY[i])) * 9);
  for (int64_t i = 0; i < 2 * M * N; ++i)
    ASSERT_NEAR(z.data<float>()[i], expectedZ[i], 1e-4f * (1 + std::fabs(expectedZ[i])) * 9);
}

TEST(ReferenceGemm, MultipliesIntegers) {
  const std::vector<int32_t> A = {1, 2, 3, 4, 5, 6};     // 2x3
  const std::vector<int32_t> B = {7, 8, 9, 10, 11, 12};  // 3x2
  std::vector<int32_t> C(4);
  referenceGemm<int32_t>(false, false, 2, 2, 3, 1, A.data(), 3, B.data(), 2, 0, C.data(), 2);
  EXPECT_EQ(C, (std::vector<int32_t>{58, 64, 139, 154}));
}

// Shape inference of the GEMM-based ops on one node whose inputs have the given types.
ir::TypeInfo inferOutput(const std::string& opType, const std::vector<ir::TypeInfo>& inputs,
                         ir::AttributeMap attrs = {}) {
  ir::Graph graph;
  ir::Node node;
  node.opType = opType;
  node.opset = 17;
  node.attrs = std::move(attrs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int id = graph.addValue("in" + std::to_string(i), inputs[i]);
    graph.inputs.push_back(id);
    node.inputs.push_back(id);
  }
  node.outputs.push_back(graph.addValue("out"));
  graph.outputs = node.outputs;
  graph.nodes.push_back(node);
  ir::inferShapes(graph);
  return graph.value(graph.outputs[0]).type;
}

ir::TypeInfo floatInput(ir::SymShape shape) {
  return ir::TypeInfo{DataType::kFloat32, std::move(shape)};
}
ir::Dim known(int64_t v) { return ir::Dim::known(v); }
const ir::Dim kBatch = ir::Dim::named("batch");

TEST(GemmOpShapes, ConvKeepsTheSymbolicBatch) {
  ir::AttributeMap attrs = {{"strides", std::vector<int64_t>{2, 2}},
                            {"pads", std::vector<int64_t>{3, 3, 3, 3}}};
  const ir::TypeInfo y = inferOutput("Conv",
                                     {floatInput({kBatch, known(3), known(224), known(224)}),
                                      floatInput(ir::symShapeOf({64, 3, 7, 7}))},
                                     attrs);
  EXPECT_EQ(y.dtype, DataType::kFloat32);
  ASSERT_TRUE(y.shape.has_value());
  EXPECT_EQ(*y.shape, (ir::SymShape{kBatch, known(64), known(112), known(112)}));
}

TEST(GemmOpShapes, ConvTransposeAndSameAutoPad) {
  const ir::SymShape x = {kBatch, known(8), known(10), ir::Dim::unknown()};
  ir::AttributeMap attrs = {{"strides", std::vector<int64_t>{2, 2}},
                            {"auto_pad", std::string("SAME_UPPER")}};
  const ir::TypeInfo conv =
      inferOutput("Conv", {floatInput(x), floatInput(ir::symShapeOf({4, 8, 3, 3}))}, attrs);
  EXPECT_EQ(*conv.shape, (ir::SymShape{kBatch, known(4), known(5), ir::Dim::unknown()}));
  const ir::TypeInfo deconv = inferOutput(
      "ConvTranspose", {floatInput(x), floatInput(ir::symShapeOf({8, 3, 3, 3}))}, attrs);
  EXPECT_EQ(*deconv.shape, (ir::SymShape{kBatch, known(3), known(20), ir::Dim::unknown()}));
}

TEST(GemmOpShapes, MatMulBroadcastsBatchesAndDropsPromotedDims) {
  const ir::Dim seq = ir::Dim::named("seq");
  EXPECT_EQ(*inferOutput("MatMul",
                         {floatInput({kBatch, seq, known(64)}), floatInput({known(64), known(10)})})
                 .shape,
            (ir::SymShape{kBatch, seq, known(10)}));
  EXPECT_EQ(*inferOutput("MatMul",
                         {floatInput({known(64)}), floatInput({known(3), known(64), known(10)})})
                 .shape,
            (ir::SymShape{known(3), known(10)}));
  EXPECT_TRUE(
      inferOutput("MatMul", {floatInput({known(5)}), floatInput({known(5)})}).shape->empty());
  EXPECT_THROW(
      inferOutput("MatMul", {floatInput({known(2), known(3)}), floatInput({known(4), known(5)})}),
      Error);
}

TEST(GemmOpShapes, GemmTransposesAndChecksC) {
  ir::AttributeMap attrs = {{"transB", int64_t{1}}};
  EXPECT_EQ(*inferOutput("Gemm",
                         {floatInput({kBatch, known(512)}), floatInput({known(10), known(512)}),
                          floatInput({known(10)})},
                         attrs)
                 .shape,
            (ir::SymShape{kBatch, known(10)}));
  EXPECT_THROW(inferOutput("Gemm",
                           {floatInput({known(2), known(512)}), floatInput({known(10), known(512)}),
                            floatInput({known(3)})},
                           attrs),
               Error);
}

TEST(GemmOpShapes, ConvRejectsMismatchedChannels) {
  EXPECT_THROW(inferOutput("Conv", {floatInput(ir::symShapeOf({1, 3, 8, 8})),
                                    floatInput(ir::symShapeOf({4, 2, 3, 3}))}),
               Error);
}

}  // namespace
}  // namespace kiln::cpu
