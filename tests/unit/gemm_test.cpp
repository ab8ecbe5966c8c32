// sgemm against a naive triple loop over edge shapes, transposes, alpha and beta.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/gemm/sgemm.h"

namespace kiln::cpu {
namespace {

std::vector<float> randomMatrix(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

void naiveGemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
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

void checkCase(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, float beta, int64_t pad,
               std::mt19937& rng) {
  // Leading dimensions larger than the logical width exercise the strides.
  const int64_t lda = (transA ? M : K) + pad;
  const int64_t ldb = (transB ? K : N) + pad;
  const int64_t ldc = N + pad;
  std::vector<float> A = randomMatrix((transA ? K : M) * lda, rng);
  std::vector<float> B = randomMatrix((transB ? N : K) * ldb, rng);
  std::vector<float> C = randomMatrix(M * ldc, rng);
  if (beta == 0.0f) std::fill(C.begin(), C.end(), std::nanf(""));  // must not be read
  std::vector<float> expected = C;
  naiveGemm(transA, transB, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, expected.data(), ldc);
  sgemm(transA, transB, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
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

TEST(Sgemm, MatchesNaiveOnEdgeShapes) {
  std::mt19937 rng(42);
  const int64_t sizes[] = {1, 2, 5, 6, 7, 16, 17, 33, 100};
  for (int64_t M : sizes) {
    for (int64_t N : sizes) {
      for (int64_t K : sizes) {
        for (int t = 0; t < 4; ++t) checkCase(t & 1, t & 2, M, N, K, 1.0f, 0.0f, 0, rng);
      }
    }
  }
}

TEST(Sgemm, AlphaBetaAndStrides) {
  std::mt19937 rng(7);
  const float scalars[][2] = {{1.0f, 1.0f}, {0.5f, 2.0f}, {-1.5f, 0.0f}, {0.0f, 0.25f}, {2.0f, -1.0f}};
  for (const auto& ab : scalars) {
    for (int t = 0; t < 4; ++t) {
      checkCase(t & 1, t & 2, 17, 33, 7, ab[0], ab[1], 3, rng);
      checkCase(t & 1, t & 2, 100, 5, 33, ab[0], ab[1], 1, rng);
    }
  }
}

TEST(Sgemm, CrossesEveryBlockBoundary) {
  std::mt19937 rng(3);
  // K > 256, M > 144 and N > 2048 each split into several packed blocks.
  checkCase(false, false, 150, 2060, 300, 1.0f, 0.5f, 0, rng);
  checkCase(true, true, 151, 40, 520, 0.75f, 1.0f, 2, rng);
}

TEST(Sgemm, EmptyDepthScalesC) {
  std::vector<float> C = {1.0f, 2.0f, 3.0f, 4.0f};
  sgemm(false, false, 2, 2, 0, 1.0f, nullptr, 0, nullptr, 2, 3.0f, C.data(), 2);
  EXPECT_EQ(C, (std::vector<float>{3.0f, 6.0f, 9.0f, 12.0f}));
}

TEST(Sgemm, ReportsSpeedOn512Cube) {
  const int64_t n = 512;
  std::mt19937 rng(1);
  std::vector<float> A = randomMatrix(n * n, rng), B = randomMatrix(n * n, rng), C(n * n);
  sgemm(false, false, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(), n);  // warm-up
  const int reps = 5;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) sgemm(false, false, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(), n);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double gflops = 2.0 * n * n * n * reps / seconds * 1e-9;
  std::printf("sgemm 512^3 single thread: %.1f GFLOP/s\n", gflops);
  SUCCEED();
}

TEST(ReferenceGemm, MultipliesIntegers) {
  const std::vector<int32_t> A = {1, 2, 3, 4, 5, 6};  // 2x3
  const std::vector<int32_t> B = {7, 8, 9, 10, 11, 12};  // 3x2
  std::vector<int32_t> C(4);
  referenceGemm<int32_t>(2, 2, 3, A.data(), B.data(), C.data());
  EXPECT_EQ(C, (std::vector<int32_t>{58, 64, 139, 154}));
}

}  // namespace
}  // namespace kiln::cpu
