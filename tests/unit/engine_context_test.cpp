// Execution contexts: bindings, resolved shapes, profiles, the engine inspector and the profiler.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine_test_support.h"
#include "kiln/onnx_parser.h"
#include "kiln/profiler.h"
#include "model_builder.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using ::testing::HasSubstr;

// y = relu(x) + 1, z = x * 2 with x dynamic in dim 0; two profiles.
std::shared_ptr<const Engine> twoOutputEngine(RecordingLogger& logger) {
  NetworkDefinition network(logger);
  ITensor* x = network.addInput("x", DataType::kFloat32, {-1, 2});
  ILayer* relu = network.addActivation(*x, ActivationType::kRELU);
  std::vector<float> one{1.0f}, two{2.0f};
  ILayer* c1 = network.addConstant({1}, floatWeights(one));
  ILayer* c2 = network.addConstant({1}, floatWeights(two));
  ILayer* y =
      network.addElementWise(*relu->getOutput(0), *c1->getOutput(0), ElementWiseOperation::kSUM);
  ILayer* z = network.addElementWise(*x, *c2->getOutput(0), ElementWiseOperation::kPROD);
  y->getOutput(0)->setName("y").ok();
  z->getOutput(0)->setName("z").ok();
  network.markOutput(*y->getOutput(0)).ok();
  network.markOutput(*z->getOutput(0)).ok();
  BuilderConfig config;
  for (auto [lo, hi] : {std::pair<int64_t, int64_t>{1, 4}, {5, 16}}) {
    OptimizationProfile p;
    p.setDimensions("x", OptProfileSelector::kMIN, {lo, 2});
    p.setDimensions("x", OptProfileSelector::kOPT, {lo, 2});
    p.setDimensions("x", OptProfileSelector::kMAX, {hi, 2});
    config.addOptimizationProfile(p);
  }
  return buildEngine(logger, network, config);
}

TEST(EngineInspector, DescribesIOProfilesAndLayers) {
  RecordingLogger logger;
  auto engine = twoOutputEngine(logger);
  ASSERT_TRUE(engine);
  ASSERT_EQ(engine->getNbIOTensors(), 3);
  EXPECT_EQ(engine->getIOTensorName(0), "x");
  EXPECT_EQ(engine->getTensorIOMode("x"), TensorIOMode::kINPUT);
  EXPECT_EQ(engine->getTensorIOMode("z"), TensorIOMode::kOUTPUT);
  EXPECT_EQ(engine->getTensorIOMode("nope"), TensorIOMode::kNONE);
  EXPECT_EQ(engine->getTensorDataType("y"), DataType::kFloat32);
  EXPECT_EQ(engine->getTensorShape("y"), (Shape{-1, 2}));
  EXPECT_EQ(engine->getNbOptimizationProfiles(), 2);
  EXPECT_EQ(engine->getProfileShape("x", 1, OptProfileSelector::kMAX), (Shape{16, 2}));
  ASSERT_EQ(engine->getNbLayers(), 3);
  EXPECT_EQ(engine->getLayerInfo(0).kernel, "any_relu_generic");
  EXPECT_EQ(engine->getLayerInfo(0).kernelIsa, "avx2");
  EXPECT_EQ(engine->getPlanInfo().kilnVersion, "0.1.0");
  EXPECT_EQ(engine->getPlanInfo().layersAfter, 3);
}

TEST(ExecutionContext, ZeroCopyBuffersResolvedShapesAndProfiles) {
  RecordingLogger logger;
  auto engine = twoOutputEngine(logger);
  ASSERT_TRUE(engine);
  auto context = engine->createExecutionContext();
  ASSERT_TRUE(context.ok());
  ExecutionContext& ctx = **context;
  EXPECT_EQ(*ctx.getTensorShape("y"), (Shape{-1, 2}));
  ASSERT_TRUE(ctx.setInputShape("x", {3, 2}).ok());
  EXPECT_EQ(*ctx.getTensorShape("y"), (Shape{3, 2}));
  std::vector<float> x{-1, 2, -3, 4, 5, -6}, y(6), z(6);
  ASSERT_TRUE(ctx.setTensorAddress("x", x.data(), x.size() * 4).ok());
  ASSERT_TRUE(ctx.setTensorAddress("y", y.data(), y.size() * 4).ok());
  ASSERT_TRUE(ctx.setTensorAddress("z", z.data(), z.size() * 4).ok());
  ASSERT_TRUE(ctx.execute().ok());
  EXPECT_EQ(y, (std::vector<float>{1, 3, 1, 5, 6, 1}));
  EXPECT_EQ(z, (std::vector<float>{-2, 4, -6, 8, 10, -12}));
  x[0] = 7;  // the input is read in place
  ASSERT_TRUE(ctx.execute().ok());
  EXPECT_EQ(y[0], 8);

  EXPECT_THAT(ctx.setInputShape("x", {6, 2}).message(),
              HasSubstr("index 0: got 6, expected 1..4 (optimization profile 0)"));
  ASSERT_TRUE(ctx.setOptimizationProfile(1).ok());
  EXPECT_TRUE(ctx.setInputShape("x", {6, 2}).ok());
  EXPECT_THAT(ctx.setInputShape("x", {2, 2}).message(),
              HasSubstr("expected 5..16 (optimization profile 1)"));
  EXPECT_FALSE(ctx.setOptimizationProfile(2).ok());
}

TEST(ExecutionContext, ErrorsNameTheTensor) {
  RecordingLogger logger;
  auto engine = twoOutputEngine(logger);
  ASSERT_TRUE(engine);
  auto context = engine->createExecutionContext();
  ExecutionContext& ctx = **context;
  Status s = ctx.execute();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("input 'x' has no data"));
  EXPECT_THAT(ctx.setInputShape("w", {1, 2}).message(),
              HasSubstr("'w' is not an input or output of the engine (it has: x, y, z)"));
  EXPECT_THAT(ctx.setInputShape("y", {1, 2}).message(), HasSubstr("'y' is an output"));
  std::vector<float> x(8), y(2);
  ASSERT_TRUE(ctx.setTensorAddress("x", x.data()).ok());
  EXPECT_THAT(ctx.execute().message(),
              HasSubstr("input 'x' has dynamic dims (?x2); set its shape with setInputShape"));
  ASSERT_TRUE(ctx.setInputShape("x", {4, 2}).ok());
  ASSERT_TRUE(ctx.setTensorAddress("y", y.data(), y.size() * 4).ok());
  EXPECT_THAT(ctx.execute().message(),
              HasSubstr("output 'y' float32[4x2] needs 32 bytes, its buffer has 8"));
  EXPECT_THAT(ctx.setInputTensor("x", Tensor(DataType::kInt64, {1, 2})).message(),
              HasSubstr("int64"));
  EXPECT_THAT(ctx.getOutputTensor("x").status().message(), HasSubstr("not an output"));
}

std::shared_ptr<const Engine> engineFromModel(const onnx::ModelProto& m, RecordingLogger& logger) {
  std::string bytes = m.SerializeAsString();
  NetworkDefinition network(logger);
  OnnxParser parser(network, logger);
  EXPECT_TRUE(parser.parse(bytes.data(), bytes.size()).ok()) << logger.text();
  return buildEngine(logger, network);
}

// Outputs whose size the input shapes determine are computed in the bound buffer itself: the
// output tensor views the caller's memory, so no copy is made after the run.
TEST(ExecutionContext, OutputsAreComputedInTheBoundBuffers) {
  RecordingLogger logger;
  auto engine = twoOutputEngine(logger);
  ASSERT_TRUE(engine);
  auto context = engine->createExecutionContext();
  ExecutionContext& ctx = **context;
  std::vector<float> x{-1, 2, -3, 4, 5, -6, 7, -8}, y(8, 99), z(8, 99);
  for (int64_t rows : {3, 4}) {
    ASSERT_TRUE(ctx.setInputShape("x", {rows, 2}).ok());
    ASSERT_TRUE(ctx.setTensorAddress("x", x.data(), x.size() * 4).ok());
    ASSERT_TRUE(ctx.setTensorAddress("y", y.data(), y.size() * 4).ok());
    ASSERT_TRUE(ctx.setTensorAddress("z", z.data(), z.size() * 4).ok());
    ASSERT_TRUE(ctx.execute().ok());
    EXPECT_EQ(ctx.getOutputTensor("y")->raw(), y.data());
    EXPECT_EQ(ctx.getOutputTensor("z")->raw(), z.data());
    for (size_t i = 0; i < static_cast<size_t>(rows * 2); ++i) {
      EXPECT_EQ(y[i], std::max(x[i], 0.0f) + 1) << i;
      EXPECT_EQ(z[i], x[i] * 2) << i;
    }
  }
}

// Inputs bound with setTensorAddress are read where they are: an output that is a view of the
// input (Reshape) is the caller's input memory itself.
TEST(ExecutionContext, InputsAreReadInPlace) {
  auto m = makeModel();
  addInput(m, "x", {2, 3});
  auto* shape = m.mutable_graph()->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(2);
  shape->add_int64_data(3);
  shape->add_int64_data(2);
  addNode(m, "Reshape", {"x", "shape"}, {"y"}, "reshape");
  addOutput(m, "y", {3, 2});
  RecordingLogger logger;
  auto engine = engineFromModel(m, logger);
  ASSERT_TRUE(engine);
  auto context = engine->createExecutionContext();
  std::vector<float> x{1, 2, 3, 4, 5, 6};
  ASSERT_TRUE((*context)->setTensorAddress("x", x.data(), x.size() * 4).ok());
  ASSERT_TRUE((*context)->execute().ok());
  Tensor y = *(*context)->getOutputTensor("y");
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(y.raw(), x.data());
}

// NonZero's output size is known only after it ran: it is computed elsewhere and copied into the
// bound buffer.
TEST(ExecutionContext, DataDependentOutputsAreCopiedIntoTheBoundBuffer) {
  auto m = makeModel();
  addInput(m, "x", {5});
  addNode(m, "NonZero", {"x"}, {"y"}, "nonzero");
  addOutput(m, "y", {1, -1}, onnx::TensorProto::INT64);
  RecordingLogger logger;
  auto engine = engineFromModel(m, logger);
  ASSERT_TRUE(engine);
  auto context = engine->createExecutionContext();
  std::vector<float> x{0, 7, 0, 0, 9};
  std::vector<int64_t> y(5, -1);
  ASSERT_TRUE((*context)->setTensorAddress("x", x.data(), x.size() * 4).ok());
  ASSERT_TRUE((*context)->setTensorAddress("y", y.data(), y.size() * 8).ok());
  ASSERT_TRUE((*context)->execute().ok());
  EXPECT_NE((*context)->getOutputTensor("y")->raw(), y.data());
  EXPECT_EQ((*context)->getOutputTensor("y")->shape(), (Shape{1, 2}));
  EXPECT_EQ(y, (std::vector<int64_t>{1, 4, -1, -1, -1}));
}

// One buffer bound as both input and output: computing the output there would overwrite the
// input while it is read, so the output is computed elsewhere and copied after the run.
TEST(ExecutionContext, AnOutputBufferThatIsAlsoTheInputIsWrittenAfterTheRun) {
  auto m = makeModel();
  addInput(m, "x", {2, 3});
  addNode(m, "Transpose", {"x"}, {"y"}, "transpose");
  addOutput(m, "y", {3, 2});
  RecordingLogger logger;
  auto engine = engineFromModel(m, logger);
  ASSERT_TRUE(engine);
  auto context = engine->createExecutionContext();
  std::vector<float> data{1, 2, 3, 4, 5, 6};
  ASSERT_TRUE((*context)->setTensorAddress("x", data.data(), data.size() * 4).ok());
  ASSERT_TRUE((*context)->setTensorAddress("y", data.data(), data.size() * 4).ok());
  ASSERT_TRUE((*context)->execute().ok());
  EXPECT_EQ(data, (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(ExecutionContext, ShapeInputValuesAreCheckedAgainstTheProfile) {
  auto m = makeModel();
  addInput(m, "x", {6});
  addInput(m, "shape", {2}, onnx::TensorProto::INT64);
  addNode(m, "Reshape", {"x", "shape"}, {"y"}, "reshape");
  addOutput(m, "y", {-1, -1});
  std::string bytes = m.SerializeAsString();
  RecordingLogger logger;
  NetworkDefinition network(logger);
  OnnxParser parser(network, logger);
  ASSERT_TRUE(parser.parse(bytes.data(), bytes.size()).ok()) << logger.text();
  OptimizationProfile profile;
  profile.setShapeValues("shape", OptProfileSelector::kMIN, {1, 1});
  profile.setShapeValues("shape", OptProfileSelector::kOPT, {2, 3});
  profile.setShapeValues("shape", OptProfileSelector::kMAX, {6, 6});
  BuilderConfig config;
  config.addOptimizationProfile(profile);
  auto engine = buildEngine(logger, network, config);
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->getProfileShapeValues("shape", 0, OptProfileSelector::kMAX),
            (std::vector<int64_t>{6, 6}));
  auto context = engine->createExecutionContext();
  ExecutionContext& ctx = **context;
  ASSERT_TRUE(ctx.setInputTensor(
                     "x", Tensor::fromVector<float>(DataType::kFloat32, {6}, {1, 2, 3, 4, 5, 6}))
                  .ok());
  ASSERT_TRUE(
      ctx.setInputTensor("shape", Tensor::fromVector<int64_t>(DataType::kInt64, {2}, {3, 2})).ok());
  ASSERT_TRUE(ctx.execute().ok());
  EXPECT_EQ(ctx.getOutputTensor("y")->shape(), (Shape{3, 2}));
  ASSERT_TRUE(
      ctx.setInputTensor("shape", Tensor::fromVector<int64_t>(DataType::kInt64, {2}, {-1, 6}))
          .ok());
  EXPECT_THAT(ctx.execute().message(),
              HasSubstr("shape input 'shape' value index 0: got -1, expected 1..6"));
}

// IProfiler: every layer of every run after setProfiler, in order, with op and input shapes.
class RecordingProfiler : public IProfiler {
 public:
  void reportLayerTime(const LayerTiming& timing) override { layers.push_back(timing); }
  std::vector<LayerTiming> layers;
};

TEST(Profiler, ReportsEachLayerOfEachRun) {
  auto m = makeModel();
  addInput(m, "x", {2, 3});
  addNode(m, "Relu", {"x"}, {"r"}, "relu");
  addNode(m, "Neg", {"r"}, {"y"}, "neg");
  addOutput(m, "y", {2, 3});
  RecordingLogger logger;
  auto engine = engineFromModel(m, logger);
  ASSERT_TRUE(engine);
  auto context = engine->createExecutionContext();
  ASSERT_TRUE(context.ok());
  std::vector<float> x{1, -2, 3, -4, 5, -6};
  ASSERT_TRUE((*context)->setTensorAddress("x", x.data(), x.size() * 4).ok());
  ASSERT_TRUE((*context)->execute().ok());  // not profiled

  RecordingProfiler profiler;
  (*context)->setProfiler(&profiler);
  EXPECT_EQ((*context)->getProfiler(), &profiler);
  ASSERT_TRUE((*context)->execute().ok());
  ASSERT_TRUE((*context)->execute().ok());
  ASSERT_EQ(profiler.layers.size(), 4u);
  EXPECT_EQ(profiler.layers[0].name, "relu");
  EXPECT_EQ(profiler.layers[0].opType, "Relu");
  EXPECT_EQ(profiler.layers[0].shapes, "2x3");
  EXPECT_EQ(profiler.layers[1].name, "neg");
  EXPECT_EQ(profiler.layers[3].name, "neg");
  for (const LayerTiming& t : profiler.layers) EXPECT_GE(t.ms, 0.0);

  (*context)->setProfiler(nullptr);
  ASSERT_TRUE((*context)->execute().ok());
  EXPECT_EQ(profiler.layers.size(), 4u);
}

}  // namespace
}  // namespace kiln
