// The network definition API's layers and errors, and the builder's validation of profiles,
// flags and limits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine_test_support.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using ::testing::HasSubstr;

TEST(NetworkApi, InvalidLayersReturnNullAndLogWhy) {
  RecordingLogger logger;
  NetworkDefinition network(logger);
  ITensor* x = network.addInput("x", DataType::kFloat32, {1, 3, 8, 8});
  std::vector<float> w(4 * 3 * 9, 1.0f);
  EXPECT_EQ(network.addConvolution(*x, 4, {3, 3}, floatWeights({1, 2}), {}), nullptr);
  EXPECT_THAT(logger.text(), HasSubstr("kernel weights has 2 values, needs 108"));
  ITensor* y = network.addInput("y", DataType::kFloat32, {5});
  EXPECT_EQ(network.addElementWise(*x, *y, ElementWiseOperation::kSUM), nullptr);
  EXPECT_THAT(logger.text(), HasSubstr("Add"));
  EXPECT_EQ(network.getNbLayers(), 0);
  EXPECT_EQ(network.addInput("x", DataType::kFloat32, {1}), nullptr);
  EXPECT_THAT(logger.text(), HasSubstr("'x' is defined twice"));
  ILayer* conv = network.addConvolution(*x, 4, {3, 3}, floatWeights(w), {});
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->getOutput(0)->getDimensions(), (Shape{1, 4, 6, 6}));
  EXPECT_EQ(network.getNbLayers(), 1);
}

TEST(NetworkApi, LayersComputeWhatTheirOnnxOperatorsDo) {
  RecordingLogger logger;
  NetworkDefinition network(logger);
  ITensor* a = network.addInput("a", DataType::kFloat32, {2, 3});
  ITensor* b = network.addInput("b", DataType::kFloat32, {2, 3});
  ILayer* sub = network.addElementWise(*a, *b, ElementWiseOperation::kSUB);
  ILayer* mm = network.addMatrixMultiply(*a, MatrixOperation::kNONE, *b,
                                         MatrixOperation::kTRANSPOSE);  // 2x2
  ShuffleParams shuffle;
  shuffle.firstTranspose = {1, 0};
  shuffle.hasReshape = true;
  shuffle.reshapeDims = {1, 6};
  ILayer* shuf = network.addShuffle(*a, shuffle);
  std::vector<float> c{10, 20};
  ILayer* constant = network.addConstant({2, 1}, floatWeights(c));
  ILayer* cat = network.addConcatenation({sub->getOutput(0), constant->getOutput(0)}, 1);  // 2x4
  ILayer* soft = network.addSoftMax(*cat->getOutput(0), 1);
  ResizeParams upsample;
  upsample.scales = {1.0f, 2.0f};
  ILayer* resize = network.addResize(*a, upsample);
  for (ILayer* l : {sub, mm, shuf, constant, cat, soft, resize})
    ASSERT_NE(l, nullptr) << logger.text();
  EXPECT_EQ(shuf->getOutput(0)->getDimensions(), (Shape{1, 6}));
  EXPECT_EQ(resize->getOutput(0)->getDimensions(), (Shape{2, 6}));
  for (ILayer* l : {sub, mm, shuf, cat, soft, resize}) network.markOutput(*l->getOutput(0)).ok();

  auto engine = buildEngine(logger, network);
  ASSERT_TRUE(engine);
  auto context = engine->createExecutionContext();
  auto out = runContext(
      **context, *engine,
      {{"a", floats({2, 3}, {1, 2, 3, 4, 5, 6})}, {"b", floats({2, 3}, {1, 1, 1, 2, 2, 2})}});
  EXPECT_EQ(values(out[sub->getOutput(0)->getName()]), (std::vector<float>{0, 1, 2, 2, 3, 4}));
  EXPECT_EQ(values(out[mm->getOutput(0)->getName()]), (std::vector<float>{6, 12, 15, 30}));
  EXPECT_EQ(values(out[shuf->getOutput(0)->getName()]), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(values(out[cat->getOutput(0)->getName()]),
            (std::vector<float>{0, 1, 2, 10, 2, 3, 4, 20}));
  EXPECT_EQ(values(out[resize->getOutput(0)->getName()]),
            (std::vector<float>{1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6}));
  auto s = values(out[soft->getOutput(0)->getName()]);
  EXPECT_NEAR(s[0] + s[1] + s[2] + s[3], 1.0f, 1e-6);
}

TEST(NetworkApi, NamesInputsAndOutputTypes) {
  RecordingLogger logger;
  NetworkDefinition network(logger);
  ITensor* a = network.addInput("a", DataType::kFloat32, {3});
  ITensor* b = network.addInput("b", DataType::kFloat32, {3});
  ILayer* relu = network.addActivation(*a, ActivationType::kRELU);
  relu->setName("my_relu");
  EXPECT_EQ(relu->getName(), "my_relu");
  EXPECT_EQ(relu->getInput(0), a);
  EXPECT_FALSE(relu->getOutput(0)->setName("a").ok());  // taken
  ASSERT_TRUE(relu->getOutput(0)->setName("r").ok());
  ASSERT_TRUE(relu->setInput(0, *b).ok());
  relu->setOutputType(0, DataType::kFloat64);
  EXPECT_EQ(relu->getOutputType(0), DataType::kFloat64);
  network.markOutput(*relu->getOutput(0)).ok();
  EXPECT_TRUE(relu->getOutput(0)->isNetworkOutput());
  auto engine = buildEngine(logger, network);
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->getTensorDataType("r"), DataType::kFloat64);
  auto context = engine->createExecutionContext();
  auto out = runContext(**context, *engine,
                        {{"a", floats({3}, {1, 1, 1})}, {"b", floats({3}, {-1, 2, -3})}});
  ASSERT_EQ(out["r"].dtype(), DataType::kFloat64);
  EXPECT_EQ(out["r"].data<double>()[1], 2.0);
  EXPECT_EQ(out["r"].data<double>()[2], 0.0);
}

class BuilderValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    network = std::make_unique<NetworkDefinition>(logger);
    ITensor* x = network->addInput("x", DataType::kFloat32, {-1, 3, -1});
    ILayer* relu = network->addActivation(*x, ActivationType::kRELU);
    network->markOutput(*relu->getOutput(0)).ok();
  }
  Status build(const OptimizationProfile& p, BuilderConfig config = {}) {
    config.addOptimizationProfile(p);
    auto plan = Builder(logger).buildSerializedNetwork(*network, config);
    return plan.ok() ? Status() : plan.status();
  }
  static OptimizationProfile profile(Shape lo, Shape opt, Shape hi) {
    OptimizationProfile p;
    p.setDimensions("x", OptProfileSelector::kMIN, lo);
    p.setDimensions("x", OptProfileSelector::kOPT, opt);
    p.setDimensions("x", OptProfileSelector::kMAX, hi);
    return p;
  }
  RecordingLogger logger;
  std::unique_ptr<NetworkDefinition> network;
};

TEST_F(BuilderValidation, AcceptsAGoodProfile) {
  EXPECT_TRUE(build(profile({1, 3, 1}, {2, 3, 5}, {4, 3, 9})).ok());
}

TEST_F(BuilderValidation, MinGreaterThanOpt) {
  EXPECT_THAT(build(profile({3, 3, 1}, {2, 3, 5}, {4, 3, 9})).message(),
              HasSubstr("optimization profile 0, input 'x', index 0: min 3 is greater than opt 2"));
}

TEST_F(BuilderValidation, OptGreaterThanMax) {
  EXPECT_THAT(build(profile({1, 3, 1}, {2, 3, 10}, {4, 3, 9})).message(),
              HasSubstr("index 2: opt 10 is greater than max 9"));
}

TEST_F(BuilderValidation, FixedDimThatDisagrees) {
  EXPECT_THAT(
      build(profile({1, 4, 1}, {2, 4, 5}, {4, 4, 9})).message(),
      HasSubstr(
          "index 1: the network fixes this dim to 3 but the profile's min/opt/max are 4/4/4"));
}

TEST_F(BuilderValidation, WrongRankMissingSelectorAndUnknownInput) {
  EXPECT_THAT(build(profile({1, 3}, {1, 3}, {1, 3})).message(),
              HasSubstr("rank 2 but the network's input has rank 3"));
  OptimizationProfile p;
  p.setDimensions("x", OptProfileSelector::kMIN, {1, 3, 1});
  EXPECT_THAT(build(p).message(), HasSubstr("the opt dims are not set"));
  OptimizationProfile q = profile({1, 3, 1}, {1, 3, 1}, {1, 3, 1});
  q.setDimensions("ghost", OptProfileSelector::kMIN, {1});
  EXPECT_THAT(build(q).message(), HasSubstr("sets dims for 'ghost', which is not an input"));
}

TEST_F(BuilderValidation, PrecisionFlagsAndWorkspace) {
  network->getLayer(0)->setPrecision(DataType::kFloat16);
  Status s = build(profile({1, 3, 1}, {1, 3, 1}, {1, 3, 1}));
  EXPECT_THAT(
      s.message(),
      HasSubstr("layer 'Relu_0' asks for precision float16 but the builder flag kFP16 is not set"));
  BuilderConfig fp16;
  fp16.setFlag(BuilderFlag::kFP16);
  fp16.setFlag(BuilderFlag::kINT8);
  EXPECT_TRUE(build(profile({1, 3, 1}, {1, 3, 1}, {1, 3, 1}), fp16).ok());
  EXPECT_THAT(logger.text(Severity::kWARNING),
              HasSubstr("layer precisions are ignored without kOBEY_PRECISION_CONSTRAINTS"));
  // The workspace is the arena of intermediate tensors: x -> Relu -> (Sigmoid, Tanh) has one.
  network = std::make_unique<NetworkDefinition>(logger);
  ITensor* x = network->addInput("x", DataType::kFloat32, {-1, 3, -1});
  ITensor* relu = network->addActivation(*x, ActivationType::kRELU)->getOutput(0);
  network->markOutput(*network->addActivation(*relu, ActivationType::kSIGMOID)->getOutput(0)).ok();
  network->markOutput(*network->addActivation(*relu, ActivationType::kTANH)->getOutput(0)).ok();
  BuilderConfig small;
  small.setFlag(BuilderFlag::kFP16);
  small.setMemoryPoolLimit(1000);
  s = build(profile({1, 3, 1}, {1, 3, 1}, {1000, 3, 1000}), small);
  EXPECT_THAT(s.message(), HasSubstr("more than the workspace limit"));
}

TEST(BuilderErrors, NoOutputsAndUnsupportedLayers) {
  RecordingLogger logger;
  NetworkDefinition network(logger);
  network.addInput("x", DataType::kFloat32, {2});
  auto plan = Builder(logger).buildSerializedNetwork(network, {});
  EXPECT_THAT(plan.status().message(), HasSubstr("no outputs"));
}

TEST(BuilderReport, StagesAndCounts) {
  RecordingLogger logger;
  NetworkDefinition network(logger);
  ITensor* x = network.addInput("x", DataType::kFloat32, {1, 4});
  std::vector<float> c{1, 2, 3, 4};
  ILayer* k = network.addConstant({1, 4}, floatWeights(c));
  ILayer* twice = network.addElementWise(*k->getOutput(0), *k->getOutput(0),
                                         ElementWiseOperation::kSUM);  // folded
  ILayer* add = network.addElementWise(*x, *twice->getOutput(0), ElementWiseOperation::kSUM);
  network.markOutput(*add->getOutput(0)).ok();
  BuildReport report;
  auto plan = Builder(logger).buildSerializedNetwork(network, {}, &report);
  ASSERT_TRUE(plan.ok()) << plan.status().toString();
  ASSERT_EQ(report.stages.size(), 4u);
  EXPECT_EQ(report.stages[0].name, "optimize");
  EXPECT_EQ(report.stages[3].name, "serialize");
  EXPECT_EQ(report.layersBefore, 2);
  EXPECT_EQ(report.layersAfter, 1);
  EXPECT_EQ(report.planBytes, plan->size());
  EXPECT_EQ(report.arenaBytes, 0u);  // the only tensor left is the graph output: not in the arena
  EXPECT_THAT(
      logger.text(Severity::kVERBOSE),
      HasSubstr("layer 'Add_2' (Add): kernel any_add_generic -> Add_2_output float32[1x4]"));
  EXPECT_THAT(logger.text(Severity::kVERBOSE),
              HasSubstr("node 'Add_1' (Add): folded into a constant"));
}

}  // namespace
}  // namespace kiln
