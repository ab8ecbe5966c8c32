// sgemm against a naive triple loop over edge shapes, transposes, alpha and beta.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <random>
#include <vector>

#include "backends/cpu/gemm/sgemm.h"
#include "ir/op_schema.h"

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
          << "M=" << M << " N=" << N << " K=" << K << " transA=" << transA << " transB=" << transB << " alpha=" << alpha
          << " beta=" << beta << " at (" << i << "," << j << ")";
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
      checkCase(t & 1, t & 2, 1, 40, 70, ab[0], ab[1], 2, rng);  // row-vector path
      checkCase(t & 1, t & 2, 37, 1, 20, ab[0], ab[1], 2, rng);  // column-vector path
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
  // CPU time rather than wall time: the figure stays meaningful on a loaded machine.
  const std::clock_t start = std::clock();
  for (int r = 0; r < reps; ++r) sgemm(false, false, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(), n);
  const double seconds = static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
  const double gflops = 2.0 * n * n * n * reps / seconds * 1e-9;
  std::printf("sgemm 512^3 single thread: %.1f GFLOP/s\n", gflops);
  SUCCEED();
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

ir::TypeInfo floatInput(ir::SymShape shape) { return ir::TypeInfo{DataType::kFloat32, std::move(shape)}; }
ir::Dim known(int64_t v) { return ir::Dim::known(v); }
const ir::Dim kBatch = ir::Dim::named("batch");

TEST(GemmOpShapes, ConvKeepsTheSymbolicBatch) {
  ir::AttributeMap attrs = {{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{3, 3, 3, 3}}};
  const ir::TypeInfo y = inferOutput(
      "Conv", {floatInput({kBatch, known(3), known(224), known(224)}), floatInput(ir::symShapeOf({64, 3, 7, 7}))},
      attrs);
  EXPECT_EQ(y.dtype, DataType::kFloat32);
  ASSERT_TRUE(y.shape.has_value());
  EXPECT_EQ(*y.shape, (ir::SymShape{kBatch, known(64), known(112), known(112)}));
}

TEST(GemmOpShapes, ConvTransposeAndSameAutoPad) {
  const ir::SymShape x = {kBatch, known(8), known(10), ir::Dim::unknown()};
  ir::AttributeMap attrs = {{"strides", std::vector<int64_t>{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}};
  const ir::TypeInfo conv = inferOutput("Conv", {floatInput(x), floatInput(ir::symShapeOf({4, 8, 3, 3}))}, attrs);
  EXPECT_EQ(*conv.shape, (ir::SymShape{kBatch, known(4), known(5), ir::Dim::unknown()}));
  const ir::TypeInfo deconv =
      inferOutput("ConvTranspose", {floatInput(x), floatInput(ir::symShapeOf({8, 3, 3, 3}))}, attrs);
  EXPECT_EQ(*deconv.shape, (ir::SymShape{kBatch, known(3), known(20), ir::Dim::unknown()}));
}

TEST(GemmOpShapes, MatMulBroadcastsBatchesAndDropsPromotedDims) {
  const ir::Dim seq = ir::Dim::named("seq");
  EXPECT_EQ(*inferOutput("MatMul", {floatInput({kBatch, seq, known(64)}), floatInput({known(64), known(10)})}).shape,
            (ir::SymShape{kBatch, seq, known(10)}));
  EXPECT_EQ(*inferOutput("MatMul", {floatInput({known(64)}), floatInput({known(3), known(64), known(10)})}).shape,
            (ir::SymShape{known(3), known(10)}));
  EXPECT_TRUE(inferOutput("MatMul", {floatInput({known(5)}), floatInput({known(5)})}).shape->empty());
  EXPECT_THROW(inferOutput("MatMul", {floatInput({known(2), known(3)}), floatInput({known(4), known(5)})}), Error);
}

TEST(GemmOpShapes, GemmTransposesAndChecksC) {
  ir::AttributeMap attrs = {{"transB", int64_t{1}}};
  EXPECT_EQ(
      *inferOutput("Gemm",
                   {floatInput({kBatch, known(512)}), floatInput({known(10), known(512)}), floatInput({known(10)})},
                   attrs)
           .shape,
      (ir::SymShape{kBatch, known(10)}));
  EXPECT_THROW(
      inferOutput("Gemm",
                  {floatInput({known(2), known(512)}), floatInput({known(10), known(512)}), floatInput({known(3)})},
                  attrs),
      Error);
}

TEST(GemmOpShapes, ConvRejectsMismatchedChannels) {
  EXPECT_THROW(
      inferOutput("Conv", {floatInput(ir::symShapeOf({1, 3, 8, 8})), floatInput(ir::symShapeOf({4, 2, 3, 3}))}), Error);
}

}  // namespace
}  // namespace kiln::cpu
