// OnnxParser: models into networks, and errors with codes, node indices and names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine_test_support.h"
#include "kiln/onnx_parser.h"
#include "model_builder.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using ::testing::HasSubstr;

TEST(OnnxParser, ParsesAModelIntoLayersAndBuildsIt) {
  auto m = makeModel();
  addInput(m, "x", {-1, 3});
  addFloatInitializer(m, "b", {3}, {1, -2, 3});
  addNode(m, "Add", {"x", "b"}, {"s"}, "add");
  addNode(m, "Relu", {"s"}, {"y"}, "relu");
  addOutput(m, "y", {-1, 3});
  std::string bytes = m.SerializeAsString();
  RecordingLogger logger;
  NetworkDefinition network(logger);
  OnnxParser parser(network, logger);
  ASSERT_TRUE(parser.parse(bytes.data(), bytes.size()).ok()) << logger.text();
  EXPECT_EQ(network.getNbLayers(), 2);
  EXPECT_EQ(network.getLayer(1)->getName(), "relu");
  EXPECT_EQ(network.getLayer(1)->getType(), "Relu");
  EXPECT_EQ(network.getInput(0)->getDimensions(), (Shape{-1, 3}));
  OptimizationProfile p;
  for (auto which : {OptProfileSelector::kMIN, OptProfileSelector::kOPT, OptProfileSelector::kMAX})
    p.setDimensions("x", which, {2, 3});
  BuilderConfig config;
  config.addOptimizationProfile(p);
  auto engine = buildEngine(logger, network, config);
  ASSERT_TRUE(engine);
  auto context = engine->createExecutionContext();
  auto out = runContext(
      **context, *engine,
      {{"x", Tensor::fromVector<float>(DataType::kFloat32, {2, 3}, {1, 2, -3, 0, 0, 0})}});
  EXPECT_EQ(values(out["y"]), (std::vector<float>{2, 0, 0, 1, 0, 3}));
}

TEST(OnnxParser, ReportsEveryUnsupportedNodeInOnePass) {
  auto m = makeModel();
  addInput(m, "x", {3});
  addNode(m, "FancyOp", {"x"}, {"a"}, "first");
  addNode(m, "Relu", {"a"}, {"b"}, "fine");
  addNode(m, "OtherOp", {"b"}, {"y"}, "second");
  addOutput(m, "y", {3});
  auto dir = tempDir("parser_unsupported");
  std::string path = saveModel(m, dir / "m.onnx");
  RecordingLogger logger;
  NetworkDefinition network(logger);
  OnnxParser parser(network, logger);
  Status s = parser.parseFromFile(path);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupportedNode);
  ASSERT_EQ(parser.getNbErrors(), 2);
  EXPECT_EQ(parser.getError(0).code, ParserErrorCode::kUNSUPPORTED_NODE);
  EXPECT_EQ(parser.getError(0).nodeIndex, 0);
  EXPECT_EQ(parser.getError(0).nodeName, "first");
  EXPECT_EQ(parser.getError(1).nodeIndex, 2);
  EXPECT_EQ(parser.getError(1).opType, "OtherOp");
  EXPECT_THAT(parser.getError(1).toString(),
              HasSubstr("UNSUPPORTED_NODE node 2 'second' (OtherOp)"));
  EXPECT_EQ(network.getNbLayers(), 0);
}

TEST(OnnxParser, MalformedMissingAndInvalidModels) {
  RecordingLogger logger;
  {
    NetworkDefinition network(logger);
    OnnxParser parser(network, logger);
    std::string junk = "GIF89a not protobuf \xff\xff\xff";
    EXPECT_FALSE(parser.parse(junk.data(), junk.size()).ok());
    ASSERT_EQ(parser.getNbErrors(), 1);
    EXPECT_EQ(parser.getError(0).code, ParserErrorCode::kMODEL_DESERIALIZE_FAILED);
  }
  {
    NetworkDefinition network(logger);
    OnnxParser parser(network, logger);
    EXPECT_EQ(parser.parseFromFile("/nonexistent/m.onnx").code(), ErrorCode::kIoError);
    EXPECT_EQ(parser.getError(0).code, ParserErrorCode::kIO_ERROR);
  }
  {
    auto m = makeModel();
    addInput(m, "x", {2, 3});
    addInput(m, "w", {4, 5});
    addNode(m, "MatMul", {"x", "w"}, {"y"}, "mm");
    addOutput(m, "y", {2, 5});
    std::string bytes = m.SerializeAsString();
    NetworkDefinition network(logger);
    OnnxParser parser(network, logger);
    EXPECT_FALSE(parser.parse(bytes.data(), bytes.size()).ok());
    ASSERT_EQ(parser.getNbErrors(), 1);
    EXPECT_EQ(parser.getError(0).code, ParserErrorCode::kINVALID_NODE);
    EXPECT_EQ(parser.getError(0).nodeIndex, 0);
    EXPECT_EQ(parser.getError(0).nodeName, "mm");
  }
}

}  // namespace
}  // namespace kiln
