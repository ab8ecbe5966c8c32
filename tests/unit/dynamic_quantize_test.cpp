// DynamicQuantizeLinear on an infinite range (session_run fuzz finding: the zero point was
// inf / inf = NaN converted to uint8, UBSan).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits>

#include "single_node_model.h"

namespace kiln {
namespace {

using namespace kiln::testing;

TEST(DynamicQuantizeLinear, AnInfiniteRangeGivesAnInfiniteScaleAndZeroPointZero) {
  const float inf = std::numeric_limits<float>::infinity();
  auto y = SingleNodeModel("DynamicQuantizeLinear", 11)
               .input("x", Tensor::fromVector<float>(DataType::kFloat32, {3}, {-inf, 1.0f, 2.0f}))
               .output("y")
               .output("scale")
               .output("zero_point")
               .run();
  EXPECT_EQ(valuesOf<float>(y[1].second)[0], inf);
  EXPECT_EQ(valuesOf<uint8_t>(y[2].second)[0], 0);
}

}  // namespace
}  // namespace kiln
