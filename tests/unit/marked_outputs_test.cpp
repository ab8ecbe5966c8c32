// Intermediate tensors marked as outputs (SessionOptions::extraOutputs / markAllOutputs, and
// NetworkDefinition::markOutput on a parsed network): a tensor a fusion would swallow is still
// produced, with the unfused graph's value; and the reference mode (referenceKernels) computes
// the same results on the most general kernels.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "engine_test_support.h"
#include "kiln/onnx_parser.h"
#include "kiln/session.h"
#include "model_builder.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// x [1, 16, 8, 8] -> Conv 3x3 (bias) -> "conv" -> Relu -> "relu" -> Add x -> "y": Conv + Relu
// (and the NCHWc layout) fuse when nothing is marked.
std::string convReluModel() {
  auto m = makeModel();
  addInput(m, "x", {1, 16, 8, 8});
  std::vector<float> w(16 * 16 * 9), b(16);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37f * static_cast<float>(i)) * 0.2f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.05f * static_cast<float>(i) - 0.4f;
  addFloatInitializer(m, "w", {16, 16, 3, 3}, w);
  addFloatInitializer(m, "b", {16}, b);
  addNode(m, "Conv", {"x", "w", "b"}, {"conv"}, "conv_node");
  auto* pads = m.mutable_graph()->mutable_node(0)->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  addNode(m, "Relu", {"conv"}, {"relu"}, "relu_node");
  addNode(m, "Add", {"relu", "x"}, {"y"}, "add_node");
  addOutput(m, "y", {1, 16, 8, 8});
  return m.SerializeAsString();
}

Tensor input() {
  Tensor x(DataType::kFloat32, {1, 16, 8, 8});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = std::cos(0.11f * static_cast<float>(i));
  return x;
}

void expectNear(const Tensor& a, const Tensor& b, float tolerance) {
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i)
    ASSERT_NEAR(a.data<float>()[i], b.data<float>()[i], tolerance) << "element " << i;
}

NamedTensors runModel(const std::string& bytes, const SessionOptions& options) {
  Session s(bytes.data(), bytes.size(), options);
  return s.run({{"x", input()}});
}

TEST(MarkedOutputs, ATensorAFusionWouldSwallowIsProducedWithTheUnfusedValue) {
  const std::string bytes = convReluModel();
  SessionOptions plain;
  plain.optimize = false;
  const NamedTensors unfused = [&] {
    plain.extraOutputs = {"conv", "relu"};
    return runModel(bytes, plain);
  }();
  SessionOptions marked;
  marked.extraOutputs = {"conv", "relu"};
  const NamedTensors out = runModel(bytes, marked);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].first, "y");
  EXPECT_EQ(out[1].first, "conv");
  EXPECT_EQ(out[2].first, "relu");
  for (size_t i = 0; i < 3; ++i) expectNear(out[i].second, unfused[i].second, 1e-4f);
  // The conv output has negative values, the Relu's none: they are really two tensors.
  float lowest = 0;
  for (int64_t i = 0; i < out[1].second.numel(); ++i)
    lowest = std::min(lowest, out[1].second.data<float>()[i]);
  EXPECT_LT(lowest, 0);
  // The model's output is the same with and without marks.
  expectNear(runModel(bytes, {})[0].second, out[0].second, 1e-5f);
}

TEST(MarkedOutputs, MarkAllReturnsEveryNodeOutputInTopologicalOrder) {
  SessionOptions options;
  options.markAllOutputs = true;
  const std::string bytes = convReluModel();
  Session s(bytes.data(), bytes.size(), options);
  std::vector<std::string> names;
  for (const TensorInfo& info : s.outputs()) names.push_back(info.name);
  EXPECT_THAT(names, ElementsAre("y", "conv", "relu"));
}

TEST(MarkedOutputs, AnUnknownNameIsAnError) {
  SessionOptions options;
  options.extraOutputs = {"conv", "nope"};
  const std::string bytes = convReluModel();
  try {
    Session s(bytes.data(), bytes.size(), options);
    FAIL() << "a name the graph lacks was marked";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(),
                HasSubstr("cannot mark 'nope' as an output: the graph has no tensor of that name"));
  }
}

TEST(MarkedOutputs, ReferenceKernelsComputeTheSameResults) {
  const std::string bytes = convReluModel();
  SessionOptions reference;
  reference.optimize = false;
  reference.nchwcLayout = false;
  reference.referenceKernels = true;
  expectNear(runModel(bytes, reference)[0].second, runModel(bytes, {})[0].second, 1e-4f);
}

TEST(MarkedOutputs, AParsedNetworkMarksAnIntermediateTensorAsAnEngineOutput) {
  StderrLogger logger(Severity::kERROR);
  Builder builder(logger);
  auto network = builder.createNetwork();
  OnnxParser parser(*network, logger);
  const std::string bytes = convReluModel();
  ASSERT_TRUE(parser.parse(bytes.data(), bytes.size()).ok());
  ITensor* conv = nullptr;
  for (int i = 0; i < network->getNbLayers(); ++i)
    if (network->getLayer(i)->getOutput(0)->getName() == "conv")
      conv = network->getLayer(i)->getOutput(0);
  ASSERT_NE(conv, nullptr);
  ASSERT_TRUE(network->markOutput(*conv).ok());
  auto engine = buildEngine(logger, *network);
  ASSERT_NE(engine, nullptr);
  auto context = engine->createExecutionContext();
  ASSERT_TRUE(context.ok());
  auto outputs = runContext(**context, *engine, {{"x", input()}});
  ASSERT_EQ(outputs.count("conv"), 1u);
  SessionOptions plain;
  plain.optimize = false;
  plain.extraOutputs = {"conv"};
  const NamedTensors unfused = runModel(bytes, plain);
  expectNear(outputs["conv"], unfused[1].second, 1e-4f);
  expectNear(outputs["y"], unfused[0].second, 1e-4f);
}

}  // namespace
}  // namespace kiln
