// Pow with one exponent of 1, 2, 3 or 0.5 (the multiply/sqrt paths) against std::pow, and an
// exponent off those paths, a broadcast exponent and a rank-growing scalar exponent.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "single_node_model.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using namespace kiln::testing;

Tensor floats(Shape shape, std::vector<float> v) {
  return Tensor::fromVector<float>(DataType::kFloat32, std::move(shape), v);
}

Tensor pow(const Tensor& x, const Tensor& e) {
  return SingleNodeModel("Pow", 15).input("x", x).input("e", e).output("y").run()[0].second;
}

TEST(PowKernel, SmallExponentsMatchStdPowWithinOneUlp) {
  const std::vector<float> x{-2.5f, -1.0f, 0.0f, 0.3f, 1.7f, 3.0f, 1e-3f, 12345.6f};
  for (float e : {1.0f, 2.0f, 3.0f, 0.5f}) {
    const Tensor y = pow(floats({8}, x), floats({}, {e}));
    ASSERT_EQ(y.shape(), (Shape{8}));
    for (size_t i = 0; i < x.size(); ++i) {
      const float expected = std::pow(x[i], e), got = y.data<float>()[i];
      if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(got)) << x[i] << "^" << e;
      } else {
        EXPECT_LE(std::fabs(got - expected), std::fabs(expected) * 2.5e-7f) << x[i] << "^" << e;
      }
    }
  }
}

TEST(PowKernel, OtherAndBroadcastExponents) {
  EXPECT_THAT(valuesOf<float>(pow(floats({3}, {2, 4, 9}), floats({1}, {-1.0f}))),
              ElementsAre(0.5f, 0.25f, 1.0f / 9));
  EXPECT_THAT(valuesOf<float>(pow(floats({2, 2}, {2, 3, 4, 5}), floats({2}, {2, 3}))),
              ElementsAre(4, 27, 16, 125));
  const Tensor grown = pow(floats({2}, {3, 4}), floats({1, 1}, {2.0f}));
  EXPECT_EQ(grown.shape(), (Shape{1, 2}));
  EXPECT_THAT(valuesOf<float>(grown), ElementsAre(9, 16));
}

}  // namespace
}  // namespace kiln
