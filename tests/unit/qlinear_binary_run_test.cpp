// qlinearBinaryRun (kiln::QLinearAdd / QLinearMul) on AVX-512 against its AVX2 code and a plain
// scalar reference, bit for bit: run lengths around the 8- and 16-lane widths, every step pattern
// (both operands read, either one repeated, both repeated), every signedness of A, B and C, zero
// points at the ends and the middle of the range, and output scales that saturate at both ends.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels/qlinear_binary_run.h"

namespace kiln::cpu {
namespace {

// The DequantizeLinear -> Add/Mul -> QuantizeLinear chain on one element, in float.
template <typename Q, typename A, typename B>
Q plainChain(QLinearBinaryOp op, A a, FloatQuantization qa, B b, FloatQuantization qb,
             FloatQuantization qc) {
  const float x = (static_cast<float>(a) - qa.zeroPoint) * qa.scale;
  const float y = (static_cast<float>(b) - qb.zeroPoint) * qb.scale;
  const float v = op == QLinearBinaryOp::kMul ? x * y : x + y;
  const float scaled = v / qc.scale;
  if (std::isnan(scaled)) return std::numeric_limits<Q>::lowest();
  const float q = std::clamp(std::nearbyint(scaled) + qc.zeroPoint,
                             static_cast<float>(std::numeric_limits<Q>::lowest()),
                             static_cast<float>(std::numeric_limits<Q>::max()));
  return static_cast<Q>(q);
}

template <typename T>
std::vector<T> randomBytes(std::mt19937& rng, int64_t n) {
  std::uniform_int_distribution<int> dist(std::numeric_limits<T>::lowest(),
                                          std::numeric_limits<T>::max());
  std::vector<T> v(static_cast<size_t>(n));
  for (T& x : v) x = static_cast<T>(dist(rng));
  return v;
}

template <typename T>
std::vector<float> zeroPoints() {
  if constexpr (std::is_same_v<T, uint8_t>)
    return {0.0f, 128.0f, 255.0f};
  else
    return {-128.0f, 0.0f, 127.0f};
}

template <typename A, typename B, typename Q>
void checkCombination(std::mt19937& rng, int& checked) {
  // Output scales: ordinary, tiny (saturates at both ends), large (most results near the zero
  // point).
  const std::vector<float> outScales{0.0371f, 1e-4f, 3.7f};
  for (QLinearBinaryOp op : {QLinearBinaryOp::kAdd, QLinearBinaryOp::kMul}) {
    for (int64_t n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 127, 200, 1000}) {
      for (int steps = 0; steps < 4; ++steps) {
        const int64_t stepA = steps & 1 ? 0 : 1, stepB = steps & 2 ? 0 : 1;
        const std::vector<A> a = randomBytes<A>(rng, n);
        const std::vector<B> b = randomBytes<B>(rng, n);
        for (float za : zeroPoints<A>()) {
          for (float zc : zeroPoints<Q>()) {
            for (float sc : outScales) {
              const FloatQuantization qa{0.0213f, za}, qb{0.0457f, zeroPoints<B>()[1]}, qc{sc, zc};
              std::vector<Q> wide(static_cast<size_t>(n) + 1, Q(7)), narrow = wide;
              qlinearBinaryRun(op, a.data(), stepA, qa, b.data(), stepB, qb, wide.data(), n, qc);
              {
                ScopedCpuIsaLimit limit(CpuIsa::kAvx2);
                qlinearBinaryRun(op, a.data(), stepA, qa, b.data(), stepB, qb, narrow.data(), n,
                                 qc);
              }
              const std::string what = std::string(op == QLinearBinaryOp::kMul ? "Mul" : "Add") +
                                       " n " + std::to_string(n) + " steps " +
                                       std::to_string(stepA) + "," + std::to_string(stepB) +
                                       " za " + std::to_string(za) + " zc " + std::to_string(zc) +
                                       " sc " + std::to_string(sc);
              for (int64_t j = 0; j < n; ++j) {
                const Q expected = plainChain<Q>(op, a[static_cast<size_t>(j * stepA)], qa,
                                                 b[static_cast<size_t>(j * stepB)], qb, qc);
                ASSERT_EQ(int(wide[static_cast<size_t>(j)]), int(expected)) << what << " at " << j;
                ASSERT_EQ(int(narrow[static_cast<size_t>(j)]), int(expected))
                    << what << " at " << j;
              }
              ASSERT_EQ(int(wide[static_cast<size_t>(n)]), 7) << what << ": wrote past the end";
              ++checked;
            }
          }
        }
      }
    }
  }
}

TEST(QLinearBinaryRun, WideAndNarrowCodeMatchThePlainChainBitForBit) {
  std::mt19937 rng(17);
  int checked = 0;
  checkCombination<uint8_t, uint8_t, uint8_t>(rng, checked);
  checkCombination<uint8_t, uint8_t, int8_t>(rng, checked);
  checkCombination<uint8_t, int8_t, uint8_t>(rng, checked);
  checkCombination<int8_t, uint8_t, int8_t>(rng, checked);
  checkCombination<int8_t, int8_t, int8_t>(rng, checked);
  checkCombination<int8_t, int8_t, uint8_t>(rng, checked);
  EXPECT_GT(checked, 0);
}

// Every pair of uint8 values once (a 65536-element run), where ties of x / scale are frequent:
// scales that are powers of two and a zero point in the middle.
TEST(QLinearBinaryRun, EveryPairOfBytesWithTiesMatches) {
  std::vector<uint8_t> a(65536), b(65536);
  for (int i = 0; i < 65536; ++i) {
    a[static_cast<size_t>(i)] = static_cast<uint8_t>(i >> 8);
    b[static_cast<size_t>(i)] = static_cast<uint8_t>(i & 255);
  }
  for (QLinearBinaryOp op : {QLinearBinaryOp::kAdd, QLinearBinaryOp::kMul}) {
    for (float sc : {0.25f, 0.5f, 2.0f, 0.1f}) {
      const FloatQuantization qa{0.125f, 128.0f}, qb{0.25f, 3.0f}, qc{sc, 128.0f};
      std::vector<uint8_t> out(a.size());
      qlinearBinaryRun(op, a.data(), 1, qa, b.data(), 1, qb, out.data(), 65536, qc);
      for (size_t j = 0; j < a.size(); ++j) {
        ASSERT_EQ(int(out[j]), int(plainChain<uint8_t>(op, a[j], qa, b[j], qb, qc)))
            << "sc " << sc << " a " << int(a[j]) << " b " << int(b[j]);
      }
    }
  }
}

// An infinite input scale: infinities of both signs, and NaN (0 * inf) where a equals its zero
// point, which QuantizeLinear takes to the lowest value.
TEST(QLinearBinaryRun, InfinitiesAndNaNSaturateAsTheChainDoes) {
  std::mt19937 rng(29);
  std::vector<uint8_t> a = randomBytes<uint8_t>(rng, 200);
  const std::vector<uint8_t> b = randomBytes<uint8_t>(rng, 200);
  a[3] = a[70] = a[199] = 128;  // NaN in a 64-block and in the tail
  const FloatQuantization qa{std::numeric_limits<float>::infinity(), 128.0f}, qb{0.5f, 7.0f};
  for (QLinearBinaryOp op : {QLinearBinaryOp::kAdd, QLinearBinaryOp::kMul}) {
    for (float zc : {-128.0f, 0.0f, 127.0f}) {
      const FloatQuantization qc{0.25f, zc};
      std::vector<int8_t> out(a.size());
      qlinearBinaryRun(op, a.data(), 1, qa, b.data(), 1, qb, out.data(), 200, qc);
      for (size_t j = 0; j < a.size(); ++j) {
        ASSERT_EQ(int(out[j]), int(plainChain<int8_t>(op, a[j], qa, b[j], qb, qc)))
            << "zc " << zc << " a " << int(a[j]) << " b " << int(b[j]);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::cpu
