// Range's values where start + i * delta leaves the element type on the way although every value
// fits in it (session_run fuzz finding: int32 3 * -850837501 overflowed, UBSan).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits>

#include "single_node_model.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using namespace kiln::testing;

template <typename T>
std::vector<T> range(DataType type, T start, T limit, T delta) {
  auto scalar = [type](T v) { return Tensor::fromVector<T>(type, {}, {v}); };
  auto y = SingleNodeModel("Range", 11)
               .input("start", scalar(start))
               .input("limit", scalar(limit))
               .input("delta", scalar(delta))
               .output("y")
               .run();
  return valuesOf<T>(y[0].second);
}

TEST(RangeKernel, Int32ValuesWhoseProductWithTheIndexOverflows) {
  EXPECT_THAT(range<int32_t>(DataType::kInt32, 2000000000, -2000000000, -850837501),
              ElementsAre(2000000000, 1149162499, 298324998, -552512503, -1403350004));
}

TEST(RangeKernel, Int64FromNearTheTopToNearTheBottom) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kStep = int64_t{1} << 62;
  EXPECT_THAT(range<int64_t>(DataType::kInt64, kMax - 5, kMin + 5, -kStep),
              ElementsAre(kMax - 5, kMax - 5 - kStep, kMax - 5 - kStep - kStep, -kStep - 6));
}

}  // namespace
}  // namespace kiln
