// Tensor::intAt reads integers exactly (through a double, INT64_MAX became INT64_MIN) and
// saturates floats beyond the int64 range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "kiln/tensor.h"

namespace kiln {
namespace {

TEST(TensorIntAt, IntegersAreExactAtTheExtremes) {
  const Tensor i64 =
      Tensor::fromVector<int64_t>(DataType::kInt64, {4}, {INT64_MAX, INT64_MAX - 1, INT64_MIN, -3});
  EXPECT_EQ(i64.intAt(0), INT64_MAX);
  EXPECT_EQ(i64.intAt(1), INT64_MAX - 1);
  EXPECT_EQ(i64.intAt(2), INT64_MIN);
  EXPECT_EQ(i64.intAt(3), -3);
  const Tensor u64 = Tensor::fromVector<uint64_t>(DataType::kUint64, {2}, {UINT64_MAX, 7});
  EXPECT_EQ(u64.intAt(0), INT64_MAX);
  EXPECT_EQ(u64.intAt(1), 7);
}

TEST(TensorIntAt, FloatsBeyondTheRangeSaturateAndNanReadsAsZero) {
  const Tensor f = Tensor::fromVector<double>(
      DataType::kFloat64, {5},
      {1e30, -1e30, std::numeric_limits<double>::quiet_NaN(), -2.75, 9223372036854775808.0});
  EXPECT_EQ(f.intAt(0), INT64_MAX);
  EXPECT_EQ(f.intAt(1), INT64_MIN);
  EXPECT_EQ(f.intAt(2), 0);
  EXPECT_EQ(f.intAt(3), -2);
  EXPECT_EQ(f.intAt(4), INT64_MAX);
}

}  // namespace
}  // namespace kiln
