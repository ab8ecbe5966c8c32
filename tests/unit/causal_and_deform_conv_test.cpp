// CausalConvWithState and DeformConv against hand-computed values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "single_node_model.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using namespace kiln::testing;

Tensor floats(Shape shape, std::vector<float> v) {
  return Tensor::fromVector<float>(DataType::kFloat32, std::move(shape), v);
}

// Taps [10, 1] over [state, 1, 2, 3]: y[t] = 10 * s[t] + s[t + 1].
TEST(CausalConvWithState, ZeroAndCarriedState) {
  auto fresh = SingleNodeModel("CausalConvWithState", 27)
                   .input("x", floats({1, 1, 3}, {1, 2, 3}))
                   .input("w", floats({1, 1, 2}, {10, 1}))
                   .output("y")
                   .output("state")
                   .run();
  EXPECT_THAT(valuesOf<float>(fresh[0].second), ElementsAre(1, 12, 23));
  EXPECT_EQ(fresh[1].second.shape(), (Shape{1, 1, 1}));
  EXPECT_THAT(valuesOf<float>(fresh[1].second), ElementsAre(3));
  auto carried = SingleNodeModel("CausalConvWithState", 27)
                     .input("x", floats({1, 1, 3}, {1, 2, 3}))
                     .input("w", floats({1, 1, 2}, {10, 1}))
                     .input("b", floats({1}, {100}))
                     .input("past", floats({1, 1, 1}, {5}))
                     .output("y")
                     .output("state")
                     .run();
  EXPECT_THAT(valuesOf<float>(carried[0].second), ElementsAre(151, 112, 123));
}

// A 1x1 kernel reading half a pixel to the right: bilinear between neighbours, 0 past the edge.
TEST(DeformConv, HalfPixelOffsetInterpolates) {
  auto y = SingleNodeModel("DeformConv", 19)
               .input("x", floats({1, 1, 2, 2}, {1, 2, 3, 4}))
               .input("w", floats({1, 1, 1, 1}, {1}))
               .input("offset", floats({1, 2, 2, 2}, {0, 0, 0, 0, 0.5f, 0.5f, 0.5f, 0.5f}))
               .output("y")
               .run();
  EXPECT_EQ(y[0].second.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_THAT(valuesOf<float>(y[0].second), ElementsAre(1.5f, 1.0f, 3.5f, 2.0f));
}

}  // namespace
}  // namespace kiln
