// Nodes that once crashed kiln (issue 22) are refused at load with an error naming the node and
// the rule, before any kernel sees them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/error.h"
#include "single_node_model.h"

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;

std::string loadError(const SingleNodeModel& model) {
  try {
    model.run();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(MalformedNode, SplitOfAScalarIsRefused) {
  SingleNodeModel model("Split", 13);
  model.input("x", Tensor::fromVector<float>(DataType::kFloat32, {}, {1.0f}))
      .output("a")
      .output("b");
  EXPECT_THAT(loadError(model),
              HasSubstr("node 'Split_under_test' (Split): Split needs an input of rank >= 1"));
}

TEST(MalformedNode, AnAxisOfAScalarIsRefused) {
  // GatherElements, Unique, MeanVarianceNormalization and Slice on scalars once crashed at run
  // time.
  SingleNodeModel model("GatherElements", 13);
  model.input("x", Tensor::fromVector<float>(DataType::kFloat32, {}, {1.0f}))
      .input("i", Tensor::fromVector<int64_t>(DataType::kInt64, {}, {0}))
      .output("y");
  EXPECT_THAT(loadError(model), HasSubstr("(GatherElements): axis 0 is out of range for rank 0"));
}

TEST(MalformedNode, ARequiredInputGivenAsTheEmptyNameIsRefused) {
  SingleNodeModel model("Slice", 13);
  model.input("x", Tensor::fromVector<float>(DataType::kFloat32, {3}, {1, 2, 3}))
      .skipInput()
      .input("ends", Tensor::fromVector<int64_t>(DataType::kInt64, {1}, {2}))
      .output("y");
  EXPECT_THAT(loadError(model), HasSubstr("node 'Slice_under_test' (Slice): input 1 is required by "
                                          "Slice-13 but the node gives the empty name \"\""));
}

TEST(MalformedNode, MissingRequiredInputsAreRefused) {
  SingleNodeModel model("Slice", 13);
  model.input("x", Tensor::fromVector<float>(DataType::kFloat32, {3}, {1, 2, 3})).output("y");
  EXPECT_THAT(loadError(model),
              HasSubstr("input 1 is required by Slice-13 but the node has only 1 inputs"));
}

TEST(MalformedNode, OptionalInputsMayStillBeLeftOut) {
  SingleNodeModel model("Slice", 13);
  model.input("x", Tensor::fromVector<float>(DataType::kFloat32, {3}, {1, 2, 3}))
      .input("starts", Tensor::fromVector<int64_t>(DataType::kInt64, {1}, {1}))
      .input("ends", Tensor::fromVector<int64_t>(DataType::kInt64, {1}, {3}))
      .output("y");
  NamedTensors out = model.run();
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].second.shape(), (Shape{2}));
  EXPECT_EQ(out[0].second.data<float>()[0], 2.0f);
  EXPECT_EQ(out[0].second.data<float>()[1], 3.0f);
}

}  // namespace
}  // namespace kiln::testing
