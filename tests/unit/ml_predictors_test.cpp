// ai.onnx.ml predictors and transforms against hand-computed values (the generated comparisons
// with onnxruntime are in tests/python/test_ml_ops.py).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "engine_test_support.h"
#include "single_node_model.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using namespace kiln::testing;

TEST(LinearClassifier, MulticlassPicksTheBestScore) {
  auto out = SingleNodeModel("LinearClassifier", 1, "ai.onnx.ml")
                 .attr("coefficients", std::vector<float>{1, 0, 0, 1, 1, 1})
                 .attr("intercepts", std::vector<float>{0, 0, -2.5f})
                 .attr("classlabels_ints", std::vector<int64_t>{10, 20, 30})
                 .input("x", floats({1, 2}, {1, 2}))
                 .output("label", DataType::kInt64)
                 .output("scores")
                 .run();
  EXPECT_THAT(valuesOf<int64_t>(out[0].second), ElementsAre(20));
  EXPECT_THAT(valuesOf<float>(out[1].second), ElementsAre(1, 2, 0.5f));
}

TEST(LinearClassifier, OneScoreWithTwoLabelsWritesTwoColumns) {
  auto out = SingleNodeModel("LinearClassifier", 1, "ai.onnx.ml")
                 .attr("coefficients", std::vector<float>{1, -1})
                 .attr("intercepts", std::vector<float>{0.5f})
                 .attr("classlabels_strings", std::vector<std::string>{"no", "yes"})
                 .input("x", floats({2, 2}, {1, 0, 0, 2}))
                 .output("label", DataType::kString)
                 .output("scores")
                 .run();
  EXPECT_THAT(valuesOf<std::string>(out[0].second), ElementsAre("yes", "no"));
  EXPECT_EQ(out[1].second.shape(), (Shape{2, 2}));
  EXPECT_THAT(valuesOf<float>(out[1].second), ElementsAre(-0.5f, 1.5f, 2.5f, -1.5f));
}

TEST(LinearRegressor, ProbitIsCloseToTheNormalQuantile) {
  auto out = SingleNodeModel("LinearRegressor", 1, "ai.onnx.ml")
                 .attr("coefficients", std::vector<float>{1})
                 .attr("post_transform", "PROBIT")
                 .input("x", floats({2, 1}, {0.975f, 0.5f}))
                 .output("y")
                 .run();
  // the 97.5% quantile is 1.959964; Winitzki's erfinv is within about 2e-3
  EXPECT_THAT(valuesOf<float>(out[0].second), ElementsAre(FloatNear(1.959964f, 5e-3f), 0.0f));
}

TEST(Scaler, PerColumnOffsetAndScale) {
  auto out = SingleNodeModel("Scaler", 1, "ai.onnx.ml")
                 .attr("offset", std::vector<float>{1, 2})
                 .attr("scale", std::vector<float>{2, 0.5f})
                 .input("x", floats({2, 2}, {1, 2, 3, 4}))
                 .output("y")
                 .run();
  EXPECT_THAT(valuesOf<float>(out[0].second), ElementsAre(0, 0, 4, 1));
}

TEST(Normalizer, L1AndL2) {
  auto l2 = SingleNodeModel("Normalizer", 1, "ai.onnx.ml")
                .attr("norm", "L2")
                .input("x", floats({1, 2}, {3, 4}))
                .output("y")
                .run();
  EXPECT_THAT(valuesOf<float>(l2[0].second), ElementsAre(0.6f, 0.8f));
  auto l1 = SingleNodeModel("Normalizer", 1, "ai.onnx.ml")
                .attr("norm", "L1")
                .input("x", floats({1, 2}, {1, -3}))
                .output("y")
                .run();
  EXPECT_THAT(valuesOf<float>(l1[0].second), ElementsAre(0.25f, -0.75f));
}

TEST(SVMRegressor, RbfKernelSum) {
  auto out = SingleNodeModel("SVMRegressor", 1, "ai.onnx.ml")
                 .attr("kernel_type", "RBF")
                 .attr("kernel_params", std::vector<float>{1, 0, 0})
                 .attr("n_supports", int64_t{1})
                 .attr("support_vectors", std::vector<float>{0, 0})
                 .attr("coefficients", std::vector<float>{2})
                 .attr("rho", std::vector<float>{0.5f})
                 .input("x", floats({1, 2}, {1, 0}))
                 .output("y")
                 .run();
  EXPECT_THAT(valuesOf<float>(out[0].second),
              ElementsAre(FloatNear(2 * std::exp(-1.0f) + 0.5f, 1e-6f)));
}

TEST(TreeEnsembleRegressor, AverageOfTwoStumps) {
  // tree 0: x0 <= 1 ? 4 : 8; tree 1: one leaf of 2
  auto out =
      SingleNodeModel("TreeEnsembleRegressor", 1, "ai.onnx.ml")
          .attr("nodes_treeids", std::vector<int64_t>{0, 0, 0, 1})
          .attr("nodes_nodeids", std::vector<int64_t>{0, 1, 2, 0})
          .attr("nodes_featureids", std::vector<int64_t>{0, 0, 0, 0})
          .attr("nodes_modes", std::vector<std::string>{"BRANCH_LEQ", "LEAF", "LEAF", "LEAF"})
          .attr("nodes_values", std::vector<float>{1, 0, 0, 0})
          .attr("nodes_truenodeids", std::vector<int64_t>{1, 0, 0, 0})
          .attr("nodes_falsenodeids", std::vector<int64_t>{2, 0, 0, 0})
          .attr("target_treeids", std::vector<int64_t>{0, 0, 1})
          .attr("target_nodeids", std::vector<int64_t>{1, 2, 0})
          .attr("target_ids", std::vector<int64_t>{0, 0, 0})
          .attr("target_weights", std::vector<float>{4, 8, 2})
          .attr("aggregate_function", "AVERAGE")
          .attr("base_values", std::vector<float>{10})
          .input("x", floats({2, 1}, {0.5f, 3}))
          .output("y")
          .run();
  EXPECT_THAT(valuesOf<float>(out[0].second), ElementsAre(13, 15));
}

TEST(CategoryMapper, StringsToIntegersWithDefault) {
  Tensor x(DataType::kString, {3});
  x.data<std::string>()[0] = "dog", x.data<std::string>()[1] = "emu",
  x.data<std::string>()[2] = "cat";
  auto out = SingleNodeModel("CategoryMapper", 1, "ai.onnx.ml")
                 .attr("cats_strings", std::vector<std::string>{"cat", "dog"})
                 .attr("cats_int64s", std::vector<int64_t>{1, 2})
                 .attr("default_int64", int64_t{-7})
                 .input("x", x)
                 .output("y", DataType::kInt64)
                 .run();
  EXPECT_THAT(valuesOf<int64_t>(out[0].second), ElementsAre(2, -7, 1));
}

}  // namespace
}  // namespace kiln
