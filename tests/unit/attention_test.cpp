// Attention against hand-computed values: with scale ln 3, scores [0, ln 3] give weights
// [1/4, 3/4] over values [4, 8], so an unmasked row reads 7.
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

TEST(Attention, CausalRowsSeeOnlyEarlierKeys) {
  auto y = SingleNodeModel("Attention", 23)
               .attr("scale", std::log(3.0f))
               .attr("is_causal", int64_t{1})
               .input("q", floats({1, 1, 2, 1}, {1, 1}))
               .input("k", floats({1, 1, 2, 1}, {0, 1}))
               .input("v", floats({1, 1, 2, 1}, {4, 8}))
               .output("y")
               .run();
  EXPECT_THAT(valuesOf<float>(y[0].second), ElementsAre(FloatNear(4, 1e-5f), FloatNear(7, 1e-5f)));
}

TEST(Attention, PastCacheIsPrependedAndFullyMaskedRowsAreZero) {
  Tensor mask(DataType::kBool, {1, 3});  // every key hidden (zero-initialized = false)
  auto y = SingleNodeModel("Attention", 23)
               .input("q", floats({1, 1, 1, 1}, {1}))
               .input("k", floats({1, 1, 2, 1}, {0, 1}))
               .input("v", floats({1, 1, 2, 1}, {4, 8}))
               .input("mask", mask)
               .input("past_k", floats({1, 1, 1, 1}, {5}))
               .input("past_v", floats({1, 1, 1, 1}, {6}))
               .output("y")
               .output("present_k")
               .output("present_v")
               .run();
  EXPECT_THAT(valuesOf<float>(y[0].second), ElementsAre(0));
  EXPECT_EQ(y[1].second.shape(), (Shape{1, 1, 3, 1}));
  EXPECT_THAT(valuesOf<float>(y[1].second), ElementsAre(5, 0, 1));
  EXPECT_THAT(valuesOf<float>(y[2].second), ElementsAre(6, 4, 8));
}

}  // namespace
}  // namespace kiln
