// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss against hand-computed values: weights,
// ignore_index, the three reductions, N-d inputs and SoftmaxCrossEntropyLoss's log_prob output.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/error.h"
#include "single_node_model.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using namespace kiln::testing;

Tensor floats(Shape shape, std::vector<float> v) {
  return Tensor::fromVector<float>(DataType::kFloat32, std::move(shape), v);
}
Tensor int64s(Shape shape, std::vector<int64_t> v) {
  return Tensor::fromVector<int64_t>(DataType::kInt64, std::move(shape), v);
}

// input (N=2, C=3) of log-probabilities, targets [2, 0], weights [1, 2, 3]:
// per-sample losses are 3 * 3 = 9 and 0.5 * 1 = 0.5.
NamedTensors runNll(const char* reduction, bool withWeight,
                    std::optional<int64_t> ignoreIndex = std::nullopt) {
  SingleNodeModel m("NegativeLogLikelihoodLoss", 13);
  m.attr("reduction", reduction);
  if (ignoreIndex) m.attr("ignore_index", *ignoreIndex);
  m.input("x", floats({2, 3}, {-1, -2, -3, -0.5f, -1.5f, -2.5f})).input("t", int64s({2}, {2, 0}));
  if (withWeight) m.input("w", floats({3}, {1, 2, 3}));
  return m.output("loss").run();
}

TEST(NegativeLogLikelihoodLoss, ReductionsWithWeights) {
  auto none = runNll("none", true);
  EXPECT_EQ(none[0].second.shape(), (Shape{2}));
  EXPECT_THAT(valuesOf<float>(none[0].second), ElementsAre(9.0f, 0.5f));
  EXPECT_THAT(valuesOf<float>(runNll("sum", true)[0].second), ElementsAre(9.5f));
  // mean divides by the weights used: (9 + 0.5) / (3 + 1).
  auto mean = runNll("mean", true);
  EXPECT_EQ(mean[0].second.shape(), (Shape{}));
  EXPECT_THAT(valuesOf<float>(mean[0].second), ElementsAre(2.375f));
  EXPECT_THAT(valuesOf<float>(runNll("mean", false)[0].second), ElementsAre(1.75f));
}

TEST(NegativeLogLikelihoodLoss, IgnoreIndexDropsTheSampleFromSumAndMean) {
  EXPECT_THAT(valuesOf<float>(runNll("none", true, 0)[0].second), ElementsAre(9.0f, 0.0f));
  EXPECT_THAT(valuesOf<float>(runNll("mean", true, 0)[0].second), ElementsAre(3.0f));
  // Without weights the mean counts the samples that are not ignored.
  EXPECT_THAT(valuesOf<float>(runNll("mean", false, 0)[0].second), ElementsAre(3.0f));
}

TEST(NegativeLogLikelihoodLoss, TargetOutOfRangeIsAnError) {
  SingleNodeModel m("NegativeLogLikelihoodLoss", 13);
  m.input("x", floats({1, 2}, {-1, -2})).input("t", int64s({1}, {5})).output("loss");
  try {
    m.run();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("target value 5"));
  }
}

// scores (N=1, C=2, d1=2): column 0 is [0, ln 3] -> log_softmax [ln 1/4, ln 3/4]; column 1 is
// [0, 0] -> [ln 1/2, ln 1/2]. Targets [1, 0].
TEST(SoftmaxCrossEntropyLoss, NdInputWithLogProbOutput) {
  const float ln3 = std::log(3.0f);
  auto out = SingleNodeModel("SoftmaxCrossEntropyLoss", 13)
                 .attr("reduction", "none")
                 .input("x", floats({1, 2, 2}, {0, 0, ln3, 0}))
                 .input("t", int64s({1, 2}, {1, 0}))
                 .output("loss")
                 .output("log_prob")
                 .run();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].second.shape(), (Shape{1, 2}));
  EXPECT_THAT(valuesOf<float>(out[0].second),
              ElementsAre(FloatNear(-std::log(0.75f), 1e-6f), FloatNear(std::log(2.0f), 1e-6f)));
  EXPECT_EQ(out[1].second.shape(), (Shape{1, 2, 2}));
  EXPECT_THAT(valuesOf<float>(out[1].second),
              ElementsAre(FloatNear(std::log(0.25f), 1e-6f), FloatNear(std::log(0.5f), 1e-6f),
                          FloatNear(std::log(0.75f), 1e-6f), FloatNear(std::log(0.5f), 1e-6f)));
}

TEST(SoftmaxCrossEntropyLoss, MeanWithWeightsAndIgnoreIndex) {
  const float ln3 = std::log(3.0f);
  // Sample 1 is ignored; sample 0 has weight 2: mean = 2 * -ln(3/4) / 2.
  auto out = SingleNodeModel("SoftmaxCrossEntropyLoss", 12)
                 .attr("ignore_index", int64_t{-1})
                 .input("x", floats({2, 2}, {0, ln3, 5, 1}))
                 .input("t", int64s({2}, {1, -1}))
                 .input("w", floats({2}, {4, 2}))
                 .output("loss")
                 .run();
  EXPECT_THAT(valuesOf<float>(out[0].second), ElementsAre(FloatNear(-std::log(0.75f), 1e-6f)));
}

}  // namespace
}  // namespace kiln
