// RotaryEmbedding against hand-computed rotations, in the split-halves and interleaved layouts.
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

// One head of [1, 2, 3, 4] at position 1, whose angles are 90 degrees (cos 0, sin 1) for the first
// pair and 0 degrees for the second.
std::vector<float> rotate(int64_t interleaved) {
  auto y = SingleNodeModel("RotaryEmbedding", 23)
               .attr("interleaved", interleaved)
               .input("x", floats({1, 1, 1, 4}, {1, 2, 3, 4}))
               .input("cos", floats({2, 2}, {1, 1, 0, 1}))
               .input("sin", floats({2, 2}, {0, 0, 1, 0}))
               .input("pos", Tensor::fromVector<int64_t>(DataType::kInt64, {1, 1}, {1}))
               .output("y")
               .run();
  return valuesOf<float>(y[0].second);
}

TEST(RotaryEmbedding, HalvesAndInterleavedPairs) {
  // Pairs (x[0], x[2]) and (x[1], x[3]).
  EXPECT_THAT(rotate(0), ElementsAre(-3, 2, 1, 4));
  // Pairs (x[0], x[1]) and (x[2], x[3]).
  EXPECT_THAT(rotate(1), ElementsAre(-2, 1, 3, 4));
}

}  // namespace
}  // namespace kiln
