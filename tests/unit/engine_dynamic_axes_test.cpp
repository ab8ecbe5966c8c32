// The dynamic-axes lesson of the PyTorch-to-ONNX tutorial: one Conv(3->3, 3x3) exported with a
// static input, a dynamic batch, and dynamic H/W, each fed 1x3x10x10, 2x3x10x10 and 1x3x20x20.
// kiln must accept and reject exactly what ONNX Runtime does (tests/python/test_engine_cli.py
// checks the same against onnxruntime itself), through the engine and through Session.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cctype>

#include "engine_test_support.h"
#include "kiln/onnx_parser.h"
#include "kiln/session.h"
#include "model_builder.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using ::testing::HasSubstr;

struct Export {
  const char* name;
  std::vector<std::string> dims;  // "" fixed as in the static export
  Shape minDims, maxDims;
  std::array<bool, 3> ortAccepts;  // for 1x3x10x10, 2x3x10x10, 1x3x20x20
  std::array<const char*, 3> ortComplaint;
};

const std::vector<Shape> kInputs{{1, 3, 10, 10}, {2, 3, 10, 10}, {1, 3, 20, 20}};

const Export kExports[] = {
    {"static",
     {"1", "3", "10", "10"},
     {1, 3, 10, 10},
     {1, 3, 10, 10},
     {true, false, false},
     {"", "index 0: got 2, expected 1", "index 2: got 20, expected 10"}},
    {"dynamic_batch",
     {"batch", "3", "10", "10"},
     {1, 3, 10, 10},
     {8, 3, 10, 10},
     {true, true, false},
     {"", "", "index 2: got 20, expected 10"}},
    {"dynamic_hw",
     {"1", "3", "height", "width"},
     {1, 3, 5, 5},
     {1, 3, 32, 32},
     {true, false, true},
     {"", "index 0: got 2, expected 1", ""}},
};

std::string saveConvModel(const Export& e, const std::filesystem::path& dir) {
  auto m = makeModel(13);
  auto* in = m.mutable_graph()->add_input();
  in->set_name("input");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (const auto& d : e.dims) {
    if (std::isdigit(static_cast<unsigned char>(d[0])))
      tt->mutable_shape()->add_dim()->set_dim_value(std::stoll(d));
    else
      tt->mutable_shape()->add_dim()->set_dim_param(d);
  }
  std::vector<float> w(81);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<float>(static_cast<int>(i % 7) - 3) * 0.1f;
  addFloatInitializer(m, "weight", {3, 3, 3, 3}, w);
  addFloatInitializer(m, "bias", {3}, {0.1f, -0.2f, 0.3f});
  addNode(m, "Conv", {"input", "weight", "bias"}, {"output"}, "conv");
  auto* out = m.mutable_graph()->add_output();
  out->set_name("output");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return saveModel(m, dir / (std::string(e.name) + ".onnx"));
}

Tensor pattern(const Shape& shape) {
  Tensor t(DataType::kFloat32, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = static_cast<float>((i * 13) % 17) * 0.25f - 2.0f;
  return t;
}

TEST(DynamicAxes, SameSuccessesAndFailuresAsOnnxRuntime) {
  auto dir = tempDir("dynamic_axes");
  for (const Export& e : kExports) {
    SCOPED_TRACE(e.name);
    std::string path = saveConvModel(e, dir);
    RecordingLogger logger;
    auto builder = createBuilder(logger);
    auto network = builder->createNetwork();
    OnnxParser parser(*network, logger);
    ASSERT_TRUE(parser.parseFromFile(path).ok()) << logger.text();
    OptimizationProfile profile;
    profile.setDimensions("input", OptProfileSelector::kMIN, e.minDims);
    profile.setDimensions("input", OptProfileSelector::kOPT, e.minDims);
    profile.setDimensions("input", OptProfileSelector::kMAX, e.maxDims);
    BuilderConfig config;
    config.addOptimizationProfile(profile);
    // The heuristics' kernels, as Session's: timed tactics may pick another kernel whose sums
    // round differently, and the outputs below are compared bit for bit.
    config.setBuilderOptimizationLevel(0);
    auto engine = buildEngine(logger, *network, config);
    ASSERT_TRUE(engine);
    auto context = engine->createExecutionContext();
    ASSERT_TRUE(context.ok());
    Session session(path);

    for (size_t k = 0; k < kInputs.size(); ++k) {
      SCOPED_TRACE(shapeToString(kInputs[k]));
      Tensor x = pattern(kInputs[k]);
      Status s = (*context)->setInputTensor("input", x);
      EXPECT_EQ(s.ok(), e.ortAccepts[k]) << s.toString();
      std::string sessionError;
      NamedTensors sessionOut;
      try {
        sessionOut = session.run({{"input", x}});
      } catch (const Error& err) {
        sessionError = err.what();
      }
      EXPECT_EQ(sessionError.empty(), e.ortAccepts[k]) << sessionError;
      if (!e.ortAccepts[k]) {
        EXPECT_THAT(s.message(), HasSubstr("input 'input' has invalid dimensions"));
        EXPECT_THAT(s.message(), HasSubstr(e.ortComplaint[k]));
        EXPECT_THAT(sessionError, HasSubstr(e.ortComplaint[k]));
        continue;
      }
      ASSERT_TRUE((*context)->execute().ok());
      Tensor y = *(*context)->getOutputTensor("output");
      Shape expected{kInputs[k][0], 3, kInputs[k][2] - 2, kInputs[k][3] - 2};
      EXPECT_EQ(y.shape(), expected);
      EXPECT_EQ(values(y), values(sessionOut[0].second));
    }
  }
}

}  // namespace
}  // namespace kiln
