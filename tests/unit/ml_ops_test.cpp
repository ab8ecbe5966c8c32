// ai.onnx.ml Binarizer, ArrayFeatureExtractor and LabelEncoder against hand-computed values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "single_node_model.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using namespace kiln::testing;

TEST(Binarizer, OneAboveThreshold) {
  auto y = SingleNodeModel("Binarizer", 1, "ai.onnx.ml")
               .attr("threshold", 1.0f)
               .input("x", Tensor::fromVector<float>(DataType::kFloat32, {3}, {0.5f, 1, 2}))
               .output("y")
               .run();
  EXPECT_THAT(valuesOf<float>(y[0].second), ElementsAre(0, 0, 1));
}

TEST(ArrayFeatureExtractor, PicksColumnsOfTheLastAxis) {
  auto y =
      SingleNodeModel("ArrayFeatureExtractor", 1, "ai.onnx.ml")
          .input("x", Tensor::fromVector<float>(DataType::kFloat32, {2, 3}, {0, 1, 2, 3, 4, 5}))
          .input("i", Tensor::fromVector<int64_t>(DataType::kInt64, {2}, {2, 0}))
          .output("y")
          .run();
  EXPECT_EQ(y[0].second.shape(), (Shape{2, 2}));
  EXPECT_THAT(valuesOf<float>(y[0].second), ElementsAre(2, 0, 5, 3));
}

TEST(LabelEncoder, StringsToIntegersWithDefault) {
  Tensor x(DataType::kString, {3});
  x.data<std::string>()[0] = "b", x.data<std::string>()[1] = "z", x.data<std::string>()[2] = "a";
  auto y = SingleNodeModel("LabelEncoder", 2, "ai.onnx.ml")
               .attr("keys_strings", std::vector<std::string>{"a", "b"})
               .attr("values_int64s", std::vector<int64_t>{1, 2})
               .attr("default_int64", int64_t{9})
               .input("x", x)
               .output("y", DataType::kInt64)
               .run();
  EXPECT_THAT(valuesOf<int64_t>(y[0].second), ElementsAre(2, 9, 1));
}

}  // namespace
}  // namespace kiln
