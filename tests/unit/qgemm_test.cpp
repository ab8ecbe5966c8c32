// The 8-bit GEMM (backends/cpu/qgemm) against a naive integer loop, bit for bit: every ISA's
// micro-kernel this CPU has (AVX2 exact and vpmaddubsw, AVX-VNNI, AVX512-VNNI), weights on either
// side, M, N, K of 1 and across every tile size's tails (K not a multiple of 4), u8 and s8
// activations and weights, zero points at their extremes, per-tensor and per-channel zero points
// and scales, weights at -128 with activations at 255 (where vpmaddubsw would saturate),
// int32 / u8 / s8 / float32 outputs with clamps, on one thread and on two.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/qgemm/qgemm.h"
#include "scoped_threads.h"

namespace kiln::cpu {
namespace {

using kiln::testing::ScopedThreads;

std::vector<CpuIsa> isasOfThisCpu() {
  std::vector<CpuIsa> isas = {CpuIsa::kAvx2};
  if (cpuHas(CpuIsa::kAvxVnni)) isas.push_back(CpuIsa::kAvxVnni);
  if (cpuHas(CpuIsa::kAvx512Vnni)) isas.push_back(CpuIsa::kAvx512Vnni);
  return isas;
}

struct Operand {
  std::vector<uint8_t> bytes;  // raw u8 or s8 bits
  bool isSigned = false;
  int32_t at(size_t i) const {
    return isSigned ? static_cast<int32_t>(static_cast<int8_t>(bytes[i])) : bytes[i];
  }
};

Operand randomOperand(size_t n, bool isSigned, uint32_t seed, int lo, int hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  Operand o;
  o.isSigned = isSigned;
  o.bytes.resize(n);
  for (auto& b : o.bytes) b = static_cast<uint8_t>(dist(rng));
  return o;
}

struct Case {
  int64_t M, N, K;
  QSide weightsSide;
  bool actSigned, weightsSigned;
  std::vector<int32_t> zeroAct, zeroWeights;  // 1 value or one per activation row / weights outer
  DataType out = DataType::kInt32;
  bool perChannelScale = false;
  bool bias = false;
  int weightLo = -128, weightHi = 127;
};

std::string describe(const Case& c, CpuIsa isa, int threads) {
  return std::string(cpuIsaName(isa)) + " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) +
         " K=" + std::to_string(c.K) +
         (c.weightsSide == QSide::kLeft ? " weights left" : " weights right") +
         (c.actSigned ? " s8" : " u8") + (c.weightsSigned ? "xs8" : "xu8") +
         " zpA=" + std::to_string(c.zeroAct[0]) + "/" + std::to_string(c.zeroAct.size()) +
         " zpW=" + std::to_string(c.zeroWeights[0]) + "/" + std::to_string(c.zeroWeights.size()) +
         " out " + dataTypeName(c.out) + " threads " + std::to_string(threads);
}

void runCase(const Case& c, CpuIsa isa, int threads) {
  SCOPED_TRACE(describe(c, isa, threads));
  const bool wLeft = c.weightsSide == QSide::kLeft;
  const int64_t wOuter = wLeft ? c.M : c.N, aOuter = wLeft ? c.N : c.M;
  // Weights stored outer-major with contiguous k; activations as the ops hold them: Conv's
  // columns (K x N, rows contiguous), MatMul's rows (M x K).
  const int actLo = c.actSigned ? -128 : 0, actHi = c.actSigned ? 127 : 255;
  const Operand w = randomOperand(static_cast<size_t>(wOuter * c.K), c.weightsSigned,
                                  7u + c.M * 31 + c.K, c.weightLo, c.weightHi);
  const Operand a = randomOperand(static_cast<size_t>(aOuter * c.K), c.actSigned,
                                  11u + c.N * 17 + c.K, actLo, actHi);
  auto wAt = [&](int64_t o, int64_t k) { return w.at(static_cast<size_t>(o * c.K + k)); };
  auto aAt = [&](int64_t o, int64_t k) {
    return a.at(static_cast<size_t>(wLeft ? k * c.N + o : o * c.K + k));
  };
  std::vector<int32_t> bias(static_cast<size_t>(wOuter));
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<int32_t>(i * 977) - 5000;
  std::vector<float> floatBias(static_cast<size_t>(wOuter));
  for (size_t i = 0; i < floatBias.size(); ++i)
    floatBias[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  std::vector<float> scales(c.perChannelScale ? static_cast<size_t>(wOuter) : 1);
  for (size_t i = 0; i < scales.size(); ++i)
    scales[i] = 0.0007f * static_cast<float>(i + 1) + 0.0003f;
  const int32_t yZero = c.out == DataType::kInt8 ? -3 : 17;
  const int32_t lowest = c.out == DataType::kInt8 ? -100 : 5,
                highest = c.out == DataType::kInt8 ? 120 : 250;

  // The naive reference.
  const size_t cells = static_cast<size_t>(c.M * c.N);
  std::vector<int32_t> expectInt(cells);
  std::vector<float> expectFloat(cells);
  std::vector<int32_t> expectQ(cells);
  for (int64_t m = 0; m < c.M; ++m) {
    for (int64_t n = 0; n < c.N; ++n) {
      const int64_t wo = wLeft ? m : n, ao = wLeft ? n : m;
      const int32_t zw = c.zeroWeights[c.zeroWeights.size() > 1 ? wo : 0];
      const int32_t za = c.zeroAct[c.zeroAct.size() > 1 ? ao : 0];
      int64_t acc = c.bias ? bias[static_cast<size_t>(wo)] : 0;
      for (int64_t k = 0; k < c.K; ++k)
        acc += static_cast<int64_t>(wAt(wo, k) - zw) * (aAt(ao, k) - za);
      const size_t i = static_cast<size_t>(m * c.N + n);
      expectInt[i] = static_cast<int32_t>(acc);
      const float scaled = static_cast<float>(expectInt[i]) *
                           scales[c.perChannelScale ? static_cast<size_t>(wo) : 0];
      // A float bias (one rounding with the product), and a fused Relu.
      const float withBias = std::fma(static_cast<float>(expectInt[i]),
                                      scales[c.perChannelScale ? static_cast<size_t>(wo) : 0],
                                      floatBias[static_cast<size_t>(wo)]);
      expectFloat[i] = std::max(withBias, 0.0f);
      expectQ[i] =
          std::clamp(static_cast<int32_t>(std::nearbyint(scaled)) + yZero, lowest, highest);
    }
  }

  const QMatrixView wView{w.bytes.data(), c.K, 1, c.weightsSigned};
  const PackedQMatrix packed = packQWeights(c.weightsSide, isa, wOuter, c.K, wView);
  ScopedThreads pool(threads);
  QGemmProblem p;
  p.M = c.M;
  p.N = c.N;
  p.K = c.K;
  p.weights = &packed;
  p.activations = wLeft ? QMatrixView{a.bytes.data(), 1, c.N, c.actSigned}
                        : QMatrixView{a.bytes.data(), c.K, 1, c.actSigned};
  // The zero points as the packed operands see them.
  std::vector<int32_t> zA = c.zeroAct, zW = c.zeroWeights;
  for (int32_t& z : zA) z = qZeroPoint(z, c.actSigned, false);
  for (int32_t& z : zW) z = qZeroPoint(z, false, !c.weightsSigned);
  (wLeft ? p.zeroLeft : p.zeroRight) = zW.data();
  (wLeft ? p.zeroLeftCount : p.zeroRightCount) = static_cast<int64_t>(zW.size());
  (wLeft ? p.zeroRight : p.zeroLeft) = zA.data();
  (wLeft ? p.zeroRightCount : p.zeroLeftCount) = static_cast<int64_t>(zA.size());
  p.bias = c.bias ? bias.data() : nullptr;
  p.output.dtype = c.out;
  p.output.scale = scales.data();
  p.output.scaleCount = static_cast<int64_t>(scales.size());
  p.output.zeroPoint = yZero;
  p.output.lowest = lowest;
  p.output.highest = highest;
  p.output.floatLowest = 0.0f;
  p.output.floatBias = floatBias.data();
  p.ldc = c.N;
  std::vector<uint8_t> workspace(qgemmWorkspaceBytes(c.weightsSide, isa, c.M, c.N, c.K, threads) +
                                 64);
  void* ws = workspace.data() + (64 - reinterpret_cast<uintptr_t>(workspace.data()) % 64) % 64;
  switch (c.out) {
    case DataType::kInt32: {
      std::vector<int32_t> y(cells, -7);
      p.C = y.data();
      qgemm(p, ws);
      ASSERT_EQ(y, expectInt);
      break;
    }
    case DataType::kFloat32: {
      std::vector<float> y(cells, -7.0f);
      p.C = y.data();
      qgemm(p, ws);
      ASSERT_EQ(y, expectFloat);
      break;
    }
    default: {
      std::vector<uint8_t> y(cells, 0xAA);
      p.C = y.data();
      qgemm(p, ws);
      std::vector<int32_t> got(cells);
      for (size_t i = 0; i < cells; ++i) {
        got[i] = c.out == DataType::kInt8 ? static_cast<int8_t>(y[i]) : y[i];
      }
      ASSERT_EQ(got, expectQ);
    }
  }
}

// Sizes across the tails of every kernel's mr (8, 6, 4) and nr (32, 16), and K around groups of 4.
const std::vector<std::array<int64_t, 3>> kShapes = {
    {1, 1, 1},    {1, 33, 5},    {7, 1, 4},  {8, 32, 64},   {9, 17, 3},
    {13, 47, 67}, {25, 65, 130}, {6, 16, 1}, {33, 31, 260},
};

TEST(QGemm, MatchesNaiveLoopOnEdgeShapesForEveryIsaAndSide) {
  for (CpuIsa isa : isasOfThisCpu()) {
    for (QSide side : {QSide::kLeft, QSide::kRight}) {
      for (const auto& [M, N, K] : kShapes) {
        for (int threads : {1, 2}) {
          runCase({M, N, K, side, false, true, {0}, {0}}, isa, threads);
          runCase({M, N, K, side, true, true, {-128}, {0}, DataType::kInt32, false, true}, isa,
                  threads);
        }
      }
    }
  }
}

TEST(QGemm, CompensatesExtremeAndPerChannelZeroPoints) {
  for (CpuIsa isa : isasOfThisCpu()) {
    for (QSide side : {QSide::kLeft, QSide::kRight}) {
      for (const auto& [M, N, K] :
           std::vector<std::array<int64_t, 3>>{{9, 17, 3}, {13, 47, 67}, {1, 40, 9}}) {
        const int64_t wOuter = side == QSide::kLeft ? M : N, aOuter = side == QSide::kLeft ? N : M;
        std::vector<int32_t> perW(static_cast<size_t>(wOuter)), perA(static_cast<size_t>(aOuter));
        for (size_t i = 0; i < perW.size(); ++i)
          perW[i] = static_cast<int32_t>(i % 5) * 60 - 128;  // -128 .. 112
        for (size_t i = 0; i < perA.size(); ++i) perA[i] = static_cast<int32_t>(i * 37 % 256);
        for (int threads : {1, 2}) {
          runCase({M, N, K, side, false, true, {255}, {127}}, isa, threads);
          runCase({M, N, K, side, false, false, {0}, {255}}, isa, threads);  // u8 x u8
          runCase({M, N, K, side, true, false, {127}, {0}}, isa, threads);   // s8 x u8
          runCase({M, N, K, side, false, true, perA, perW, DataType::kInt32, false, true}, isa,
                  threads);
        }
      }
    }
  }
}

TEST(QGemm, WeightsAtMinus128AndActivationsAt255DoNotSaturate) {
  for (CpuIsa isa : isasOfThisCpu()) {
    for (QSide side : {QSide::kLeft, QSide::kRight}) {
      Case c{5, 19, 37, side, false, true, {0}, {0}};
      c.weightLo = c.weightHi = -128;
      runCase(c, isa, 1);
      c.weightLo = c.weightHi = 127;
      runCase(c, isa, 1);
      c.weightLo = -128;  // mixed, with the extremes likely in one pair
      runCase(c, isa, 2);
    }
  }
  // Such weights are not safe for vpmaddubsw: 255 * (-128 - 128) does not fit int16.
  const std::vector<uint8_t> w(64, 0x80);
  EXPECT_FALSE(
      packQWeights(QSide::kLeft, CpuIsa::kAvx2, 4, 16, {w.data(), 16, 1, true}).maddubsSafe());
}

TEST(QGemm, ReducedRangeWeightsTakeTheMaddubsKernelExactly) {
  // Weights in [-64, 63] (ONNX Runtime's reduce_range) keep every pair within 128.
  const std::vector<uint8_t> w(64, static_cast<uint8_t>(-64));
  EXPECT_TRUE(
      packQWeights(QSide::kLeft, CpuIsa::kAvx2, 4, 16, {w.data(), 16, 1, true}).maddubsSafe());
  for (QSide side : {QSide::kLeft, QSide::kRight}) {
    for (const auto& [M, N, K] : kShapes) {
      Case c{M, N, K, side, false, true, {255}, {0}};
      c.weightLo = -64, c.weightHi = 63;
      runCase(c, CpuIsa::kAvx2, 1);
      c.weightLo = c.weightHi = -64;
      runCase(c, CpuIsa::kAvx2, 2);
    }
  }
}

TEST(QGemm, RequantizesAndDequantizesWithPerTensorAndPerChannelScales) {
  for (CpuIsa isa : isasOfThisCpu()) {
    for (QSide side : {QSide::kLeft, QSide::kRight}) {
      for (DataType out : {DataType::kUint8, DataType::kInt8, DataType::kFloat32}) {
        for (bool perChannel : {false, true}) {
          for (int threads : {1, 2}) {
            runCase({13, 47, 67, side, false, true, {3}, {0}, out, perChannel, true}, isa, threads);
            runCase({1, 9, 300, side, true, false, {-5}, {200}, out, perChannel, false}, isa,
                    threads);
          }
        }
      }
    }
  }
}

TEST(QGemm, PackedWeightsRoundTripThroughTheirBlob) {
  const Operand w = randomOperand(13 * 67, true, 5, -128, 127);
  for (CpuIsa isa : isasOfThisCpu()) {
    const PackedQMatrix m = packQWeights(QSide::kRight, isa, 13, 67, {w.bytes.data(), 67, 1, true});
    ASSERT_EQ(m.blobBytes(), PackedQMatrix::blobBytes(QSide::kRight, isa, 13, 67));
    auto copy = std::make_shared<std::vector<uint8_t>>(m.blob(), m.blob() + m.blobBytes());
    PackedQMatrix restored;
    ASSERT_TRUE(PackedQMatrix::view(QSide::kRight, isa, 13, 67, m.params(),
                                    std::shared_ptr<const uint8_t>(copy, copy->data()), restored));
    EXPECT_EQ(restored.maddubsSafe(), m.maddubsSafe());
    EXPECT_EQ(std::vector<int32_t>(restored.sums(), restored.sums() + 13),
              std::vector<int32_t>(m.sums(), m.sums() + 13));
    EXPECT_FALSE(PackedQMatrix::view(QSide::kRight, isa, 13, 67, {1, 2, 3},
                                     std::shared_ptr<const uint8_t>(copy, copy->data()), restored));
  }
}

}  // namespace
}  // namespace kiln::cpu
