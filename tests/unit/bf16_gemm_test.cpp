// The BF16 GEMM (gemm/bf16_gemm.h) against a double-precision product of the float32 operands,
// within a bound derived from BF16's precision: each operand rounded to 8 significant bits is off
// by at most u = 2^-8 relative, so a product by at most 2u + u^2, and the FP32 sum of K + 3 terms
// (products, beta * C, bias, residual) adds (K + 3) * 2^-24 of their magnitudes. Edge shapes
// cover every row and column tail of the 14 x 32 tile and several depth blocks; rounding of the
// packed weights is checked bit for bit against a table.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/gemm/bf16_gemm.h"
#include "core/half.h"
#include "guarded_workspace.h"
#include "random_data.h"
#include "scoped_threads.h"

namespace kiln::cpu {
namespace {

float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// FP32 -> BF16 round to nearest even, bit for bit: float bits in, BF16 bits out.
TEST(Bf16Rounding, NearestEvenTable) {
  const struct {
    uint32_t in;
    uint16_t out;
  } table[] = {
      {0x00000000u, 0x0000},                         // +0
      {0x80000000u, 0x8000},                         // -0
      {0x3f800000u, 0x3f80},                         // 1
      {0x3f808000u, 0x3f80},                         // 1 + half an ulp: tie, to the even 0x3f80
      {0x3f818000u, 0x3f82},                         // tie with an odd lower neighbour: up to even
      {0x3f808001u, 0x3f81},                         // just above the tie: up
      {0x3f807fffu, 0x3f80},                         // just below the tie: down
      {0xbf808000u, 0xbf80},                         // negative tie to even
      {0xbf818000u, 0xbf82}, {0x7f7fffffu, 0x7f80},  // the largest float rounds up to +inf
      {0x7f7f7fffu, 0x7f7f},                         // the largest BF16 stays
      {0x7f800000u, 0x7f80},                         // +inf
      {0xff800000u, 0xff80},                         // -inf
      {0x7fc00000u, 0x7fc0},                         // quiet NaN
      {0x7f800001u, 0x7fc0},  // signalling NaN with a low payload: stays NaN (quieted)
      {0xffc00001u, 0xffc0},  // negative NaN keeps its sign
      {0x00000001u, 0x0000},  // smallest subnormal: rounds to zero
      {0x00008000u, 0x0000},  // subnormal tie to even (0)
      {0x00018000u, 0x0002},  // subnormal tie to even (up)
      {0x00010000u, 0x0001},  // the smallest BF16 subnormal is exact
      {0x007fffffu, 0x0080},  // the largest subnormal rounds up to the smallest normal
      {0x80008001u, 0x8001},  // negative subnormal above a tie
  };
  for (const auto& row : table) {
    EXPECT_EQ(floatToBfloat16Bits(bitsToFloat(row.in)), row.out)
        << std::hex << "input 0x" << row.in;
  }
}

// The packed weights hold those bits: B = [[1, 1 + tie], [x, y]] packs pairs (k0, k1) per column.
TEST(Bf16Gemm, PacksDepthPairsPerColumn) {
  const float B[] = {1.0f, bitsToFloat(0x3f808000u), bitsToFloat(0x3f818000u), -2.0f, 0.5f,
                     3.0f};  // 3 x 2
  const PackedBf16Matrix p = packBf16B(false, 3, 2, B, 2);
  ASSERT_EQ(p.rows(), 3);
  ASSERT_EQ(p.cols(), 2);
  ASSERT_EQ(p.words(), PackedBf16Matrix::packedWords(PackedBf16Matrix::Side::kB, 3, 2));
  const int64_t nr = p.words() / 2;          // two pairs (depth padded to 4), one strip
  EXPECT_EQ(p.data()[0], 0x3f823f80u);       // column 0: depths 0 (low) and 1 (high)
  EXPECT_EQ(p.data()[1], 0xc0003f80u);       // column 1: 1 + tie -> 1, -2
  EXPECT_EQ(p.data()[nr + 0], 0x00003f00u);  // depth 2, and the zero padding depth 3
  EXPECT_EQ(p.data()[nr + 1], 0x00004040u);
  EXPECT_EQ(p.data()[2], 0u);  // columns beyond N are zero
}

struct Case {
  bool packedA;  // A is the packed constant (Conv), else B (MatMul)
  bool trans;    // the run-time operand is transposed
  int64_t M, N, K;
  float beta;
  bool epilogue;  // bias, residual and Relu
};

// Runs one case, comparing every element with the double-precision reference within the bound.
void checkCase(const Case& c, std::mt19937& rng) {
  const int64_t ldx =
      (c.packedA ? (c.trans ? c.K : c.N) : (c.trans ? c.M : c.K)) + 3;  // run-time operand
  const int64_t ldc = c.N + 2;
  const std::vector<float> A = kiln::testing::randomFloats(c.M * c.K, rng());
  const std::vector<float> B = kiln::testing::randomFloats(c.K * c.N, rng());
  const std::vector<float> bias = kiln::testing::randomFloats(c.packedA ? c.M : c.N, rng());
  const std::vector<float> residual = kiln::testing::randomFloats(c.M * c.N, rng());
  std::vector<float> C = kiln::testing::randomFloats(c.M * ldc, rng());
  if (c.beta == 0.0f)
    std::fill(C.begin(), C.end(), std::numeric_limits<float>::quiet_NaN());  // must not be read
  const std::vector<float> C0 = C;
  GemmEpilogue ep;
  if (c.epilogue) {
    ep.bias = bias.data();
    ep.biasPerRow = c.packedA;
    ep.residual = residual.data();
    ep.ldResidual = c.N;
    ep.activation.kind = ActivationKind::kRelu;
  }
  // The run-time operand in its (possibly transposed) storage.
  std::vector<float> X;
  if (c.packedA) {
    X.assign(static_cast<size_t>((c.trans ? c.N : c.K) * ldx), 0.0f);
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t j = 0; j < c.N; ++j) X[c.trans ? j * ldx + k : k * ldx + j] = B[k * c.N + j];
    const PackedBf16Matrix pa = packBf16A(false, c.M, c.K, A.data(), c.K);
    const kiln::testing::GuardedWorkspace ws(bf16GemmWorkspaceBytes(pa, c.N));
    bf16GemmPacked(pa, c.N, c.trans, X.data(), ldx, c.beta, C.data(), ldc, ws.data(), ep);
    ASSERT_TRUE(ws.intact()) << "wrote past bf16GemmWorkspaceBytes";
  } else {
    X.assign(static_cast<size_t>((c.trans ? c.K : c.M) * ldx), 0.0f);
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t k = 0; k < c.K; ++k) X[c.trans ? k * ldx + i : i * ldx + k] = A[i * c.K + k];
    // B given transposed ([N, K], a Linear layer's weight) to cover that packing too.
    std::vector<float> Bt(static_cast<size_t>(c.N * c.K));
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t j = 0; j < c.N; ++j) Bt[j * c.K + k] = B[k * c.N + j];
    const PackedBf16Matrix pb = packBf16B(true, c.K, c.N, Bt.data(), c.K);
    const kiln::testing::GuardedWorkspace ws(bf16GemmWorkspaceBytes(pb, c.M));
    bf16GemmPacked(c.trans, c.M, X.data(), ldx, pb, c.beta, C.data(), ldc, ws.data(), ep);
    ASSERT_TRUE(ws.intact()) << "wrote past bf16GemmWorkspaceBytes";
  }
  const double u = std::ldexp(1.0, -8);
  const double relative = 2 * u + u * u + static_cast<double>(c.K + 3) * std::ldexp(1.0, -24);
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double p = static_cast<double>(A[i * c.K + k]) * B[k * c.N + j];
        sum += p;
        magnitude += std::fabs(p);
      }
      if (c.beta != 0.0f) {
        sum += c.beta * static_cast<double>(C0[i * ldc + j]);
        magnitude += std::fabs(c.beta * static_cast<double>(C0[i * ldc + j]));
      }
      if (c.epilogue) {
        const double extra = bias[c.packedA ? i : j] + static_cast<double>(residual[i * c.N + j]);
        sum += extra;
        magnitude += std::fabs(bias[c.packedA ? i : j]) + std::fabs(residual[i * c.N + j]);
        sum = std::max(sum, 0.0);
      }
      const double got = C[i * ldc + j];
      ASSERT_LE(std::fabs(got - sum), relative * magnitude + 1e-30)
          << "packedA=" << c.packedA << " trans=" << c.trans << " M=" << c.M << " N=" << c.N
          << " K=" << c.K << " beta=" << c.beta << " epilogue=" << c.epilogue << " at (" << i
          << ", " << j << "): " << got << " vs " << sum;
    }
  }
  for (int64_t i = 0; i < c.M; ++i)  // the padding columns of C are not touched
    for (int64_t j = c.N; j < ldc; ++j) {
      const float before = C0[i * ldc + j], after = C[i * ldc + j];
      ASSERT_TRUE(before == after || (std::isnan(before) && std::isnan(after)))
          << "C(" << i << ", " << j << ") written";
    }
}

class Bf16GemmShapes : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!bf16GemmSupported()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  }
};

// Every row tail of the 14-row tile, column tails of the 32-column tile (and its 16-column
// half), depths that are odd, one pair, and across depth blocks; on one and two threads.
TEST_P(Bf16GemmShapes, MatchesDoubleReferenceWithinBf16Bound) {
  kiln::testing::ScopedThreads threads(GetParam());
  std::mt19937 rng(11);
  const int64_t kc = bf16GemmDepthBlock();
  for (bool packedA : {false, true}) {
    for (int64_t M = 1; M <= 29; ++M) checkCase({packedA, false, M, 33, 7, 0.0f, false}, rng);
    for (int64_t N : {1, 2, 15, 16, 17, 31, 32, 33, 47, 64, 65})
      checkCase({packedA, false, 15, N, 9, 0.0f, false}, rng);
    for (int64_t K : {int64_t{1}, int64_t{2}, int64_t{3}, kc - 1, kc, kc + 1, 2 * kc + 3}) {
      checkCase({packedA, false, 17, 40, K, 1.0f, false}, rng);
    }
    checkCase({packedA, true, 30, 50, 37, 0.5f, true}, rng);
    checkCase({packedA, false, 64, 96, 70, 0.0f, true}, rng);
    checkCase({packedA, false, 100, 200, 300, 1.0f, true},
              rng);  // large enough to be split over threads
    checkCase({packedA, true, 131, 77, 2 * kc + 5, 0.0f, false}, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, Bf16GemmShapes, ::testing::Values(1, 2));

TEST(Bf16Gemm, NotSupportedBelowTheAvx512Bf16Limit) {
  ScopedCpuIsaLimit limit(CpuIsa::kAvx512Vnni);
  EXPECT_FALSE(bf16GemmSupported());
}

TEST(Bf16Gemm, DepthBlockIsEvenAndSizedFromL1) {
  const int64_t kc = bf16GemmDepthBlock();
  EXPECT_EQ(kc % 16, 0);
  EXPECT_GE(kc, 32);
}

}  // namespace
}  // namespace kiln::cpu
