// A QOperator model (QuantizeLinear, QLinearConv 3x3 / 1x1 / depthwise with constant int8
// weights, DequantizeLinear) through a plan: built, serialized, deserialized (the convolutions'
// packed weights restored from the plan's blobs) and run, against the same model run by a
// Session, and the kernels the builder chose for it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine_test_support.h"
#include "kiln/onnx_parser.h"
#include "kiln/session.h"
#include "model_builder.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using ::testing::HasSubstr;

// An initializer of raw bytes (int8, uint8 or int32 values).
template <typename T>
void addRawInitializer(onnx::ModelProto& m, const std::string& name, int type,
                       const std::vector<int64_t>& dims, const std::vector<T>& values) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)));
}

// QLinearConv `name` from `x` (quantized at x_scale / x_zp) with random int8 weights.
void addQConv(onnx::ModelProto& m, const std::string& name, const std::string& x, int64_t ci,
              int64_t co, int64_t k, int64_t group, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-127, 127);
  std::vector<int8_t> w(static_cast<size_t>(co * ci / group * k * k));
  for (auto& v : w) v = static_cast<int8_t>(dist(rng));
  std::vector<float> wScale(static_cast<size_t>(co));
  for (size_t i = 0; i < wScale.size(); ++i) wScale[i] = 0.004f + 0.0003f * static_cast<float>(i);
  std::vector<int32_t> bias(static_cast<size_t>(co));
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<int32_t>(i * 37) - 200;
  addRawInitializer(m, name + "_w", onnx::TensorProto::INT8, {co, ci / group, k, k}, w);
  addFloatInitializer(m, name + "_ws", {co}, wScale);
  addRawInitializer(m, name + "_wz", onnx::TensorProto::INT8, {co},
                    std::vector<int8_t>(static_cast<size_t>(co), 0));
  addRawInitializer(m, name + "_b", onnx::TensorProto::INT32, {co}, bias);
  addNode(m, "QLinearConv",
          {x, "s", "z", name + "_w", name + "_ws", name + "_wz", "s", "z", name + "_b"}, {name},
          name);
  setInt(lastNode(m), "group", group);
  auto* pads = lastNode(m)->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(k / 2);
}

onnx::ModelProto qoperatorModel() {
  auto m = makeModel(13);
  addInput(m, "x", {1, 8, 9, 9});
  addFloatInitializer(m, "s", {}, {0.03f});
  addRawInitializer(m, "z", onnx::TensorProto::UINT8, {}, std::vector<uint8_t>{128});
  addNode(m, "QuantizeLinear", {"x", "s", "z"}, {"xq"}, "quantize");
  addQConv(m, "conv3x3", "xq", 8, 16, 3, 1, 1);
  addQConv(m, "conv1x1", "conv3x3", 16, 16, 1, 1, 2);
  addQConv(m, "depthwise", "conv1x1", 16, 16, 3, 16, 3);
  addNode(m, "DequantizeLinear", {"depthwise", "s", "z"}, {"y"}, "dequantize");
  addOutput(m, "y", {1, 16, 9, 9});
  return m;
}

TEST(QLinearPlan, PackedWeightsComeBackFromThePlanAndGiveTheSessionsOutput) {
  const onnx::ModelProto m = qoperatorModel();
  const std::string bytes = m.SerializeAsString();
  std::mt19937 rng(4);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(8 * 81);
  for (float& v : x) v = dist(rng);
  const Tensor input = floats({1, 8, 9, 9}, x);

  RecordingLogger logger;
  NetworkDefinition network(logger);
  OnnxParser parser(network, logger);
  ASSERT_TRUE(parser.parse(bytes.data(), bytes.size()).ok()) << logger.text();
  auto engine = buildEngine(logger, network);
  ASSERT_TRUE(engine);
  auto context = engine->createExecutionContext();
  auto fromPlan = runContext(**context, *engine, {{"x", input}});

  Session session(bytes.data(), bytes.size());
  const NamedTensors direct = session.run({{"x", input}});
  ASSERT_EQ(direct.size(), 1u);
  EXPECT_EQ(values(fromPlan["y"]), values(direct[0].second));
  const std::string log = logger.text();
  EXPECT_THAT(log, HasSubstr("kernel u8s8_qlinearconv_im2col_"));
  EXPECT_THAT(log, HasSubstr("kernel u8s8_qlinearconv_pointwise_"));
  EXPECT_THAT(log, HasSubstr("kernel u8s8_qlinearconv_depthwise_"));
}

}  // namespace
}  // namespace kiln
