// setLayerParams: changing a layer's parameters after it is made (TensorRT's typed-layer
// setters), checked by running the network.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine_test_support.h"
#include "kiln/layer_params.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using ::testing::HasSubstr;

TEST(LayerParams, PoolingStrideAndShuffleSetAfterCreationChangeWhatRuns) {
  RecordingLogger logger;
  NetworkDefinition network(logger);
  ITensor* x = network.addInput("x", DataType::kFloat32, {1, 1, 4, 4});
  ILayer* pool = network.addPooling(*x, PoolingType::kMAX, {2, 2});
  ASSERT_EQ(pool->getOutput(0)->getDimensions(), (Shape{1, 1, 3, 3}));
  ITensor* pooled = pool->getOutput(0);
  pool->setName("pool");
  PoolingParams strided = std::get<PoolingParams>(getLayerParams(network, *pool));
  strided.strides = {2, 2};
  ASSERT_TRUE(setLayerParams(network, *pool, strided).ok()) << logger.text();
  EXPECT_EQ(pool->getOutput(0), pooled);  // same tensor, new shape
  EXPECT_EQ(pooled->getDimensions(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(pool->getName(), "pool");
  EXPECT_EQ(std::get<PoolingParams>(getLayerParams(network, *pool)).strides, (Shape{2, 2}));

  ILayer* shuffle = network.addShuffle(*pooled, {});  // identity at first
  ShuffleParams flat;
  flat.hasReshape = true;
  flat.reshapeDims = {1, 4};
  ASSERT_TRUE(setLayerParams(network, *shuffle, flat).ok()) << logger.text();
  EXPECT_EQ(shuffle->getType(), "Shuffle");
  network.markOutput(*shuffle->getOutput(0)).ok();
  EXPECT_EQ(network.getNbLayers(), 2);

  auto engine = buildEngine(logger, network);
  ASSERT_TRUE(engine) << logger.text();
  auto context = engine->createExecutionContext();
  std::vector<float> in(16);
  for (int i = 0; i < 16; ++i) in[static_cast<size_t>(i)] = static_cast<float>(i);
  auto out = runContext(**context, *engine, {{"x", floats({1, 1, 4, 4}, in)}});
  const Tensor& y = out[shuffle->getOutput(0)->getName()];
  EXPECT_EQ(y.shape(), (Shape{1, 4}));
  EXPECT_EQ(values(y), (std::vector<float>{5, 7, 13, 15}));
}

TEST(LayerParams, ConvolutionPaddingAndActivationAlphaKeepTheWeights) {
  RecordingLogger logger;
  NetworkDefinition network(logger);
  ITensor* x = network.addInput("x", DataType::kFloat32, {1, 1, 2, 2});
  std::vector<float> w{1.0f}, b{-3.0f};
  ILayer* conv = network.addConvolution(*x, 1, {1, 1}, floatWeights(w), floatWeights(b));
  ConvolutionParams padded;
  padded.padding = {1, 1};
  ASSERT_TRUE(setLayerParams(network, *conv, padded).ok()) << logger.text();
  EXPECT_EQ(conv->getOutput(0)->getDimensions(), (Shape{1, 1, 4, 4}));
  ILayer* leaky = network.addActivation(*conv->getOutput(0), ActivationType::kLEAKY_RELU, 0.5f);
  ActivationParams slope = std::get<ActivationParams>(getLayerParams(network, *leaky));
  EXPECT_EQ(slope.alpha, 0.5f);
  slope.alpha = 0.25f;
  ASSERT_TRUE(setLayerParams(network, *leaky, slope).ok()) << logger.text();
  network.markOutput(*leaky->getOutput(0)).ok();

  auto engine = buildEngine(logger, network);
  ASSERT_TRUE(engine) << logger.text();
  auto context = engine->createExecutionContext();
  auto out = runContext(**context, *engine, {{"x", floats({1, 1, 2, 2}, {1, 2, 3, 8})}});
  std::vector<float> y = values(out[leaky->getOutput(0)->getName()]);
  ASSERT_EQ(y.size(), 16u);
  EXPECT_FLOAT_EQ(y[0], -0.75f);  // padding: 0 * 1 - 3, times alpha 0.25
  EXPECT_FLOAT_EQ(y[5], -0.5f);   // 1 - 3
  EXPECT_FLOAT_EQ(y[10], 5.0f);   // 8 - 3
}

TEST(LayerParams, RefusedParamsLeaveTheLayerAsItWasAndSayWhy) {
  RecordingLogger logger;
  NetworkDefinition network(logger);
  ITensor* x = network.addInput("x", DataType::kFloat32, {2, 3});
  ILayer* soft = network.addSoftMax(*x, 1);
  ILayer* relu = network.addActivation(*soft->getOutput(0), ActivationType::kRELU);
  Status s = setLayerParams(network, *soft, SoftMaxParams{5});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("Softmax layer 'Softmax_0'"));
  EXPECT_THAT(s.message(), HasSubstr("axis"));
  EXPECT_EQ(std::get<SoftMaxParams>(getLayerParams(network, *soft)).axis, 1);
  EXPECT_EQ(network.getNbLayers(), 2);
  EXPECT_EQ(relu->getInput(0), soft->getOutput(0));

  Status wrongKind = setLayerParams(network, *soft, PoolingParams{});
  EXPECT_THAT(wrongKind.message(), HasSubstr("takes SoftMaxParams, not PoolingParams"));
  std::vector<float> c{1, 2};
  ILayer* constant = network.addConstant({2}, floatWeights(c));
  EXPECT_THAT(setLayerParams(network, *constant, SoftMaxParams{0}).message(),
              HasSubstr("has no parameters to change"));

  ASSERT_TRUE(setLayerParams(network, *soft, SoftMaxParams{0}).ok()) << logger.text();
  network.markOutput(*relu->getOutput(0)).ok();
  auto engine = buildEngine(logger, network);
  ASSERT_TRUE(engine) << logger.text();
  auto context = engine->createExecutionContext();
  auto out = runContext(**context, *engine, {{"x", floats({2, 3}, {0, 1, 2, 0, 1, 2})}});
  for (float v : values(out[relu->getOutput(0)->getName()]))
    EXPECT_FLOAT_EQ(v, 0.5f);  // softmax over 2 equal rows
}

TEST(LayerParams, ConcatenationOfOneTensorTwiceKeepsBothOperands) {
  RecordingLogger logger;
  NetworkDefinition network(logger);
  ITensor* x = network.addInput("x", DataType::kFloat32, {1, 2});
  ILayer* cat = network.addConcatenation({x, x}, 0);
  ASSERT_EQ(cat->getOutput(0)->getDimensions(), (Shape{2, 2}));
  ASSERT_TRUE(setLayerParams(network, *cat, ConcatenationParams{1}).ok()) << logger.text();
  EXPECT_EQ(cat->getOutput(0)->getDimensions(), (Shape{1, 4}));
}

}  // namespace
}  // namespace kiln
