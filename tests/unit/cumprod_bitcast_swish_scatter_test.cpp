// CumProd, BitCast, Swish and TensorScatter (opsets 24 and 26) against hand-computed values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "single_node_model.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using namespace kiln::testing;

Tensor floats(Shape shape, std::vector<float> v) {
  return Tensor::fromVector<float>(DataType::kFloat32, std::move(shape), v);
}

std::vector<int64_t> cumProd(int64_t exclusive, int64_t reverse) {
  auto y = SingleNodeModel("CumProd", 26)
               .attr("exclusive", exclusive)
               .attr("reverse", reverse)
               .input("x", Tensor::fromVector<int64_t>(DataType::kInt64, {4}, {1, 2, 3, 4}))
               .input("axis", Tensor::fromVector<int32_t>(DataType::kInt32, {}, {0}))
               .output("y", DataType::kInt64)
               .run();
  return valuesOf<int64_t>(y[0].second);
}

TEST(CumProd, InclusiveExclusiveReverse) {
  EXPECT_THAT(cumProd(0, 0), ElementsAre(1, 2, 6, 24));
  EXPECT_THAT(cumProd(1, 0), ElementsAre(1, 1, 2, 6));
  EXPECT_THAT(cumProd(0, 1), ElementsAre(24, 24, 12, 4));
}

TEST(BitCast, FloatBitsAsInt32) {
  auto y = SingleNodeModel("BitCast", 26)
               .attr("to", int64_t{6})
               .input("x", floats({2}, {1.0f, -0.0f}))
               .output("y", DataType::kInt32)
               .run();
  EXPECT_EQ(y[0].second.dtype(), DataType::kInt32);
  EXPECT_THAT(valuesOf<int32_t>(y[0].second), ElementsAre(0x3F800000, INT32_MIN));
}

TEST(Swish, XTimesSigmoidAlphaX) {
  auto y = SingleNodeModel("Swish", 24)
               .attr("alpha", 2.0f)
               .input("x", floats({2}, {0, 1}))
               .output("y")
               .run();
  EXPECT_THAT(valuesOf<float>(y[0].second),
              ElementsAre(0.0f, FloatNear(1.0f / (1.0f + std::exp(-2.0f)), 1e-6f)));
}

std::vector<float> scatter(const char* mode, int64_t writeIndex) {
  auto y = SingleNodeModel("TensorScatter", 24)
               .attr("mode", mode)
               .input("cache", floats({1, 3, 1}, {1, 2, 3}))
               .input("update", floats({1, 2, 1}, {8, 9}))
               .input("at", Tensor::fromVector<int64_t>(DataType::kInt64, {1}, {writeIndex}))
               .output("y")
               .run();
  return valuesOf<float>(y[0].second);
}

TEST(TensorScatter, LinearAndCircularWrites) {
  EXPECT_THAT(scatter("linear", 1), ElementsAre(1, 8, 9));
  EXPECT_THAT(scatter("circular", 2), ElementsAre(9, 2, 8));
}

TEST(TensorScatter, LinearWritePastTheEndIsAnError) { EXPECT_THROW(scatter("linear", 2), Error); }

}  // namespace
}  // namespace kiln
