// The networks of the TensorRT tutorials, built with the network API (no ONNX file), through
// build -> serialize -> deserialize -> execution context.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "engine_test_support.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using ::testing::HasSubstr;

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

TEST(NetworkTutorial, MaxPool2x2Stride2) {
  RecordingLogger logger;
  auto builder = createBuilder(logger);
  auto network = builder->createNetwork();
  ITensor* x = network->addInput("input", DataType::kFloat32, {1, 3, 224, 224});
  ASSERT_NE(x, nullptr);
  ILayer* pool = network->addPooling(*x, PoolingType::kMAX, {2, 2}, {.strides = {2, 2}});
  ASSERT_NE(pool, nullptr) << logger.text();
  EXPECT_EQ(pool->getType(), "MaxPool");
  EXPECT_EQ(pool->getOutput(0)->getDimensions(), (Shape{1, 3, 112, 112}));
  pool->getOutput(0)->setName("output").ok();
  ASSERT_TRUE(network->markOutput(*pool->getOutput(0)).ok());

  auto engine = buildEngine(logger, *network);
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->getTensorShape("output"), (Shape{1, 3, 112, 112}));
  auto context = engine->createExecutionContext();
  ASSERT_TRUE(context.ok());

  std::vector<float> in(3 * 224 * 224);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i * 7919) % 1000) - 500.0f;
  std::vector<float> out(3 * 112 * 112, -1.0f);
  ASSERT_TRUE((*context)->setTensorAddress("input", in.data(), in.size() * 4).ok());
  ASSERT_TRUE((*context)->setTensorAddress("output", out.data(), out.size() * 4).ok());
  ASSERT_TRUE((*context)->execute().ok());
  EXPECT_EQ(*(*context)->getTensorShape("output"), (Shape{1, 3, 112, 112}));
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 112; ++i) {
      for (int j = 0; j < 112; ++j) {
        auto at = [&](int y, int x2) { return in[(c * 224 + y) * 224 + x2]; };
        float expected = std::max(std::max(at(2 * i, 2 * j), at(2 * i, 2 * j + 1)),
                                  std::max(at(2 * i + 1, 2 * j), at(2 * i + 1, 2 * j + 1)));
        ASSERT_EQ(out[(c * 112 + i) * 112 + j], expected) << c << "," << i << "," << j;
      }
    }
  }
}

TEST(NetworkTutorial, FullyConnectedThenSigmoid) {
  RecordingLogger logger;
  auto builder = createBuilder(logger);
  auto network = builder->createNetwork();
  ITensor* x = network->addInput("input", DataType::kFloat32, {1, 3});
  std::vector<float> w{1.0f, 2.0f, 0.5f, 0.1f, 0.2f, 0.5f};
  std::vector<float> b{0.3f, 0.8f};
  ILayer* fc = network->addFullyConnected(*x, 2, floatWeights(w), floatWeights(b));
  ASSERT_NE(fc, nullptr) << logger.text();
  ILayer* act = network->addActivation(*fc->getOutput(0), ActivationType::kSIGMOID);
  ASSERT_NE(act, nullptr) << logger.text();
  act->getOutput(0)->setName("prob").ok();
  network->markOutput(*act->getOutput(0)).ok();

  auto engine = buildEngine(logger, *network);
  ASSERT_TRUE(engine);
  auto context = engine->createExecutionContext();
  ASSERT_TRUE(context.ok());
  auto out =
      runContext(**context, *engine,
                 {{"input", Tensor::fromVector<float>(DataType::kFloat32, {1, 3}, {1, 2, 3})}});
  ASSERT_EQ(out.count("prob"), 1u);
  EXPECT_EQ(out["prob"].shape(), (Shape{1, 2}));
  EXPECT_NEAR(out["prob"].data<float>()[0], sigmoid(6.8f), 1e-6);
  EXPECT_NEAR(out["prob"].data<float>()[1], sigmoid(2.8f), 1e-6);
}

class DynamicConvTutorial : public ::testing::Test {
 protected:
  void SetUp() override {
    auto builder = createBuilder(logger);
    network = builder->createNetwork();
    ITensor* x = network->addInput("input", DataType::kFloat32, {-1, 1, -1, -1});
    ASSERT_NE(x, nullptr);
    ILayer* conv = network->addConvolution(*x, 1, {3, 3}, floatWeights(weights),
                                           floatWeights({0.0f}), {.padding = {1, 1}});
    ASSERT_NE(conv, nullptr) << logger.text();
    EXPECT_EQ(conv->getOutput(0)->getDimensions(), (Shape{-1, 1, -1, -1}));
    ILayer* relu = network->addActivation(*conv->getOutput(0), ActivationType::kRELU);
    ASSERT_NE(relu, nullptr);
    relu->getOutput(0)->setName("output").ok();
    network->markOutput(*relu->getOutput(0)).ok();
    profile.setDimensions("input", OptProfileSelector::kMIN, {1, 1, 3, 3});
    profile.setDimensions("input", OptProfileSelector::kOPT, {1, 1, 3, 3});
    profile.setDimensions("input", OptProfileSelector::kMAX, {10, 1, 5, 5});
  }

  RecordingLogger logger;
  std::vector<float> weights{1.0f, 2.0f, 3.1f, 0.1f, 0.1f, 0.1f, 0.2f, 0.2f, 0.2f};
  std::unique_ptr<NetworkDefinition> network;
  OptimizationProfile profile;
};

TEST_F(DynamicConvTutorial, RunsAtBatchTwoWithHandCheckedOutputs) {
  BuilderConfig config;
  config.addOptimizationProfile(profile);
  auto engine = buildEngine(logger, *network, config);
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->getTensorShape("input"), (Shape{-1, 1, -1, -1}));
  EXPECT_EQ(engine->getProfileShape("input", 0, OptProfileSelector::kMAX), (Shape{10, 1, 5, 5}));
  auto context = engine->createExecutionContext();
  ASSERT_TRUE(context.ok());
  ASSERT_TRUE((*context)->setInputShape("input", {2, 1, 3, 3}).ok());
  EXPECT_EQ(*(*context)->getTensorShape("output"), (Shape{2, 1, 3, 3}));

  std::vector<float> in{1, 1, 1, 1, 1, 1, 1, 1, 1, -1, 1, 1, 1, 0, 1, 1, 1, -1};
  std::vector<float> out(18);
  ASSERT_TRUE((*context)->setTensorAddress("input", in.data()).ok());
  ASSERT_TRUE((*context)->setTensorAddress("output", out.data(), out.size() * 4).ok());
  Status s = (*context)->execute();
  ASSERT_TRUE(s.ok()) << s.toString();
  // Worked out by hand: each output is the sum of the 3x3 weights over the in-range neighbours.
  std::vector<float> expected{0.6f, 0.9f, 0.6f, 5.7f, 7.0f, 3.6f, 5.3f, 6.4f, 3.2f,
                              0.2f, 0.5f, 0.4f, 1.6f, 4.5f, 3.1f, 2.2f, 4.2f, 2.0f};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(out[i], expected[i], 1e-5) << i;
}

TEST_F(DynamicConvTutorial, ShapesOutsideTheProfileAreRejected) {
  BuilderConfig config;
  config.addOptimizationProfile(profile);
  auto engine = buildEngine(logger, *network, config);
  ASSERT_TRUE(engine);
  auto context = engine->createExecutionContext();
  ASSERT_TRUE(context.ok());
  Status s = (*context)->setInputShape("input", {11, 1, 3, 3});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("input 'input'"));
  EXPECT_THAT(s.message(), HasSubstr("index 0: got 11, expected 1..10 (optimization profile 0)"));
  s = (*context)->setInputShape("input", {1, 1, 6, 2});
  EXPECT_THAT(s.message(), HasSubstr("index 2: got 6, expected 3..5"));
  EXPECT_THAT(s.message(), HasSubstr("index 3: got 2, expected 3..5"));
  s = (*context)->setInputShape("input", {1, 2, 3, 3});
  EXPECT_THAT(s.message(), HasSubstr("index 1: got 2, expected 1"));
  s = (*context)->setInputShape("input", {1, 1, 3});
  EXPECT_THAT(s.message(), HasSubstr("rank 3"));
}

TEST_F(DynamicConvTutorial, BuildWithoutAProfileIsRejected) {
  Builder builder(logger);
  auto plan = builder.buildSerializedNetwork(*network, BuilderConfig{});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("input 'input' has dynamic dims"));
  EXPECT_THAT(plan.status().message(), HasSubstr("no optimization profile"));
}

}  // namespace
}  // namespace kiln
