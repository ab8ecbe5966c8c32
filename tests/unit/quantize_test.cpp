// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul and QLinearConv on small
// models: rounding ties, saturation, per-axis and blocked parameters, and errors for bad shapes.
// Expected values are worked out by hand from the ONNX formulas in each test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <limits>

#include "kiln/error.h"
#include "kiln/session.h"
#include "model_builder.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using namespace kiln::testing;

// One-node model whose inputs are all graph inputs (so nothing is folded at build time).
struct OneNode {
  onnx::ModelProto model;
  NamedTensors feeds;

  OneNode(int64_t opset, const std::string& op, const std::string& nodeName)
      : model(makeModel(opset)), op(op), name(nodeName) {}
  void input(const std::string& inputName, const Tensor& value) {
    std::vector<int64_t> dims(value.shape().begin(), value.shape().end());
    addInput(model, inputName, dims, static_cast<int>(value.dtype()));
    inputs.push_back(inputName);
    feeds.emplace_back(inputName, value);
  }
  void skipInput() { inputs.push_back(""); }
  NamedTensors run(const std::vector<std::pair<std::string, DataType>>& outputs,
                   const std::vector<std::pair<std::string, int64_t>>& attrs = {}) {
    std::vector<std::string> outputNames;
    for (const auto& [n, t] : outputs) {
      outputNames.push_back(n);
      auto* vi = model.mutable_graph()->add_output();
      vi->set_name(n);
      vi->mutable_type()->mutable_tensor_type()->set_elem_type(static_cast<int>(t));
    }
    addNode(model, op, inputs, outputNames, name);
    for (const auto& [attr, v] : attrs) setInt(lastNode(model), attr, v);
    const auto path = saveModel(model, tempDir("quantize") / "model.onnx");
    Session session(path);
    return session.run(feeds);
  }

  std::string op, name;
  std::vector<std::string> inputs;
};

Tensor floats(Shape shape, const std::vector<float>& v) {
  return Tensor::fromVector(DataType::kFloat32, std::move(shape), v);
}
template <typename T>
Tensor ints(DataType dtype, Shape shape, const std::vector<T>& v) {
  return Tensor::fromVector(dtype, std::move(shape), v);
}
template <typename T>
std::vector<T> valuesOf(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

TEST(QuantizeLinear, RoundsTiesToEvenBeforeAddingTheZeroPoint) {
  OneNode n(13, "QuantizeLinear", "q");
  n.input("x", floats({9}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.49f, 5.0f, std::nanf("")}));
  n.input("scale", floats({}, {1.0f}));
  n.input("zp", ints<int8_t>(DataType::kInt8, {}, {1}));
  auto out = n.run({{"y", DataType::kInt8}});
  // round(2.5) = 2 then + 1 = 3; rounding 2.5 + 1 = 3.5 instead would give 4. NaN gives -128 as in
  // ORT.
  EXPECT_THAT(valuesOf<int8_t>(out[0].second), ElementsAre(1, 3, 3, 1, -1, -1, 4, 6, -128));
}

TEST(QuantizeLinear, SaturatesToTheOutputRange) {
  const float inf = std::numeric_limits<float>::infinity();
  OneNode n(10, "QuantizeLinear", "q");
  n.input("x", floats({7}, {-10.0f, 300.0f, 1e30f, -inf, inf, 254.6f, std::nanf("")}));
  n.input("scale", floats({}, {1.0f}));
  auto out = n.run({{"y", DataType::kUint8}});  // no zero point: uint8
  EXPECT_THAT(valuesOf<uint8_t>(out[0].second), ElementsAre(0, 255, 255, 0, 255, 255, 0));
}

TEST(QuantizeLinear, Int16PerAxis) {
  OneNode n(21, "QuantizeLinear", "q");
  n.input("x", floats({2, 3}, {100.0f, 100.0f, 100.0f, -1e6f, 1e6f, 7.0f}));
  n.input("scale", floats({3}, {1.0f, 0.5f, 2.0f}));
  n.input("zp", ints<int16_t>(DataType::kInt16, {3}, {0, 10, -1}));
  auto out = n.run({{"y", DataType::kInt16}}, {{"axis", 1}});
  // 100/1 + 0, 100/0.5 + 10, 100/2 - 1; then saturation; 7/2 = 3.5 -> 4, - 1 = 3.
  EXPECT_THAT(valuesOf<int16_t>(out[0].second), ElementsAre(100, 210, 49, -32768, 32767, 3));
}

TEST(QuantizeLinear, BlockedAlongAxisWithARemainderBlock) {
  OneNode n(21, "QuantizeLinear", "q");
  n.input("x", floats({2, 3}, {2.0f, 2.0f, 2.0f, 2.0f, 2.0f, 2.0f}));
  n.input("scale", floats({2, 2}, {1.0f, 0.5f, 0.25f, 2.0f}));  // blocks {0,1} and {2} of each row
  auto out = n.run({{"y", DataType::kUint8}}, {{"axis", 1}, {"block_size", 2}});
  EXPECT_THAT(valuesOf<uint8_t>(out[0].second), ElementsAre(2, 2, 4, 8, 8, 1));
}

TEST(QuantizeLinear, OutputDtypeAttributeWithoutZeroPoint) {
  OneNode n(21, "QuantizeLinear", "q");
  n.input("x", floats({3}, {-3.0f, 0.0f, 1000.0f}));
  n.input("scale", floats({}, {1.0f}));
  auto out = n.run({{"y", DataType::kUint16}},
                   {{"output_dtype", static_cast<int64_t>(DataType::kUint16)}});
  EXPECT_EQ(out[0].second.dtype(), DataType::kUint16);
  EXPECT_THAT(valuesOf<uint16_t>(out[0].second), ElementsAre(0, 0, 1000));
}

TEST(QuantizeLinear, BadScaleShapeNamesTheNodeAndTheInput) {
  OneNode n(13, "QuantizeLinear", "quant_node");
  n.input("x", floats({2, 3}, {1, 2, 3, 4, 5, 6}));
  n.input("scale", floats({2}, {1.0f, 1.0f}));  // axis 1 has 3 entries
  try {
    n.run({{"y", DataType::kUint8}}, {{"axis", 1}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("quant_node"));
    EXPECT_THAT(
        e.what(),
        HasSubstr("y_scale (input 1) has shape 2 but per-axis quantization along axis 1 of x 2x3"));
    EXPECT_THAT(e.what(), HasSubstr("needs shape 3"));
  }
}

TEST(QuantizeLinear, PerAxisScaleBeforeOpset13IsRefused) {
  OneNode n(10, "QuantizeLinear", "old_q");
  n.input("x", floats({2}, {1, 2}));
  n.input("scale", floats({2}, {1.0f, 1.0f}));
  try {
    n.run({{"y", DataType::kUint8}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("old_q"));
    EXPECT_THAT(e.what(), HasSubstr("y_scale (input 1) must hold one value before opset 13"));
  }
}

TEST(DequantizeLinear, PerAxisWithZeroPoints) {
  OneNode n(13, "DequantizeLinear", "dq");
  n.input("x", ints<uint8_t>(DataType::kUint8, {2, 2}, {0, 255, 10, 20}));
  n.input("scale", floats({2}, {0.5f, 2.0f}));
  n.input("zp", ints<uint8_t>(DataType::kUint8, {2}, {128, 10}));
  auto out = n.run({{"y", DataType::kFloat32}}, {{"axis", 0}});
  EXPECT_THAT(valuesOf<float>(out[0].second), ElementsAre(-64.0f, 63.5f, 0.0f, 20.0f));
}

TEST(DequantizeLinear, BlockedInt16) {
  OneNode n(21, "DequantizeLinear", "dq");
  n.input("x", ints<int16_t>(DataType::kInt16, {1, 4}, {-300, 300, 1, 2}));
  n.input("scale", floats({1, 2}, {0.5f, 4.0f}));
  n.input("zp", ints<int16_t>(DataType::kInt16, {1, 2}, {0, 1}));
  auto out = n.run({{"y", DataType::kFloat32}}, {{"axis", 1}, {"block_size", 2}});
  EXPECT_THAT(valuesOf<float>(out[0].second), ElementsAre(-150.0f, 150.0f, 0.0f, 4.0f));
}

TEST(DequantizeLinear, ZeroPointShapeMustMatchScale) {
  OneNode n(13, "DequantizeLinear", "dq_node");
  n.input("x", ints<int8_t>(DataType::kInt8, {2, 2}, {1, 2, 3, 4}));
  n.input("scale", floats({2}, {1.0f, 1.0f}));
  n.input("zp", ints<int8_t>(DataType::kInt8, {}, {0}));
  try {
    n.run({{"y", DataType::kFloat32}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("dq_node"));
    EXPECT_THAT(
        e.what(),
        HasSubstr("x_zero_point (input 2) has shape scalar but x_scale (input 1) has shape 2"));
  }
}

TEST(DynamicQuantizeLinear, ScaleAndZeroPointFromTheRange) {
  OneNode n(11, "DynamicQuantizeLinear", "dyn");
  n.input("x", floats({4}, {-1.0f, 0.0f, 1.55f, 4.1f}));
  auto out =
      n.run({{"y", DataType::kUint8}, {"scale", DataType::kFloat32}, {"zp", DataType::kUint8}});
  // scale = (4.1 - -1) / 255 = 0.02; zero point = round(0 - -1 / 0.02) = 50.
  const float scale = (4.1f - -1.0f) / 255.0f;
  EXPECT_FLOAT_EQ(out[1].second.data<float>()[0], scale);
  EXPECT_EQ(out[2].second.data<uint8_t>()[0], 50);
  EXPECT_THAT(valuesOf<uint8_t>(out[0].second),
              ElementsAre(0, 50, static_cast<uint8_t>(std::nearbyint(1.55f / scale) + 50), 255));
}

TEST(QLinearMatMul, PerColumnScaleRequantizesEachColumn) {
  OneNode n(10, "QLinearMatMul", "qmm");
  n.input("a", ints<uint8_t>(DataType::kUint8, {1, 2}, {12, 14}));
  n.input("a_scale", floats({}, {0.5f}));
  n.input("a_zp", ints<uint8_t>(DataType::kUint8, {}, {10}));
  n.input("b", ints<int8_t>(DataType::kInt8, {2, 2}, {1, -3, 2, 4}));
  n.input("b_scale", floats({2}, {1.0f, 0.25f}));
  n.input("b_zp", ints<int8_t>(DataType::kInt8, {2}, {0, 1}));
  n.input("y_scale", floats({}, {0.5f}));
  n.input("y_zp", ints<uint8_t>(DataType::kUint8, {}, {100}));
  auto out = n.run({{"y", DataType::kUint8}});
  // (a - 10) = [2, 4]; column 0: 2*1 + 4*2 = 10, * 0.5*1/0.5 = 10 -> 110;
  // column 1: 2*(-4) + 4*3 = 4, * 0.5*0.25/0.5 = 1 -> 101.
  EXPECT_THAT(valuesOf<uint8_t>(out[0].second), ElementsAre(110, 101));
}

TEST(QLinearConv, BiasAndPerChannelWeightScale) {
  OneNode n(10, "QLinearConv", "qconv");
  n.input("x", ints<uint8_t>(DataType::kUint8, {1, 1, 1, 3}, {1, 2, 3}));
  n.input("x_scale", floats({}, {1.0f}));
  n.input("x_zp", ints<uint8_t>(DataType::kUint8, {}, {1}));
  n.input("w", ints<int8_t>(DataType::kInt8, {2, 1, 1, 1}, {3, -2}));
  n.input("w_scale", floats({2}, {0.5f, 1.0f}));
  n.input("w_zp", ints<int8_t>(DataType::kInt8, {2}, {0, 0}));
  n.input("y_scale", floats({}, {1.0f}));
  n.input("y_zp", ints<int8_t>(DataType::kInt8, {}, {0}));
  n.input("B", ints<int32_t>(DataType::kInt32, {2}, {1, 200}));
  auto out = n.run({{"y", DataType::kInt8}});
  // channel 0: (x - 1) * 3 + 1 = [1, 4, 7], * 0.5 = [0.5, 2, 3.5] -> [0, 2, 4] (ties to even);
  // channel 1: (x - 1) * -2 + 200 = [200, 198, 196] -> saturated to 127.
  EXPECT_THAT(valuesOf<int8_t>(out[0].second), ElementsAre(0, 2, 4, 127, 127, 127));
}

TEST(QLinearConv, BadWeightScaleNamesTheInput) {
  OneNode n(10, "QLinearConv", "qconv_bad");
  n.input("x", ints<uint8_t>(DataType::kUint8, {1, 1, 1, 1}, {1}));
  n.input("x_scale", floats({}, {1.0f}));
  n.input("x_zp", ints<uint8_t>(DataType::kUint8, {}, {0}));
  n.input("w", ints<uint8_t>(DataType::kUint8, {2, 1, 1, 1}, {1, 1}));
  n.input("w_scale", floats({3}, {1.0f, 1.0f, 1.0f}));
  n.input("w_zp", ints<uint8_t>(DataType::kUint8, {}, {0}));
  n.input("y_scale", floats({}, {1.0f}));
  n.input("y_zp", ints<uint8_t>(DataType::kUint8, {}, {0}));
  try {
    n.run({{"y", DataType::kUint8}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("qconv_bad"));
    EXPECT_THAT(e.what(), HasSubstr("w_scale (input 4) must hold one value or 2 values"));
  }
}

}  // namespace
}  // namespace kiln
