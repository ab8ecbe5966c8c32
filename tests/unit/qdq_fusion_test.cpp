// QDQ fusion (opt/fuse_qdq.cpp, fuse_qdq_int8_moves.cpp): each test builds a small QDQ graph as
// onnxruntime's quantizer writes them, checks what fuseLayers made of it (the layers, their
// inputs, what they absorbed, or the reason a layer stays float), and runs the graph before and
// after on the same inputs: outputs within one quantization step (the float graph rounds its
// sums, the integer layers do not), or equal where the rewrite is exact.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/cpu/qgemm/qconv_nhwc.h"
#include "graph_loading.h"
#include "graph_runner.h"
#include "ir/node_attrs.h"
#include "opt/passes.h"
#include "quantized_model_builder.h"

namespace kiln {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace kiln::testing;
using Strings = std::vector<std::string>;

constexpr int kU8 = onnx::TensorProto::UINT8;
constexpr int kS8 = onnx::TensorProto::INT8;
constexpr int kI32 = onnx::TensorProto::INT32;
constexpr int kF32 = onnx::TensorProto::FLOAT;

std::vector<int32_t> randomInts(size_t n, int lo, int hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = dist(rng);
  return v;
}

// The graph as loaded and constant-folded (what fuseLayers starts from), and after fuseLayers.
struct Fused {
  ir::Graph before, after;
};

// The layout passes are off unless asked for: what these tests check is the QDQ fusion itself.
Fused fuse(const onnx::ModelProto& m, const std::string& tag, bool layouts = false) {
  Fused f{loadInferredGraph(m, "qdq_" + tag), {}};
  opt::foldConstants(f.before);
  opt::eliminateDeadNodes(f.before);
  f.after = f.before;
  opt::fuseLayers(f.after, opt::FusionOptions{layouts});
  ir::verifyGraph(f.after);
  return f;
}

Strings opTypes(const ir::Graph& g) {
  Strings ops;
  for (const auto& n : g.nodes) ops.push_back(n.opType);
  return ops;
}

const ir::Node& nodeNamed(const ir::Graph& g, const std::string& name) {
  for (const auto& n : g.nodes)
    if (n.name == name) return n;
  throw std::runtime_error("no node " + name);
}

double elementAt(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kUint8:
      return t.data<uint8_t>()[i];
    case DataType::kInt8:
      return t.data<int8_t>()[i];
    default:
      return t.data<float>()[i];
  }
}

// Runs both graphs on a random uint8 input and checks every output within `steps` (quantized
// outputs) or `steps` * `step` (float outputs); returns how many elements differ.
int64_t compareRuns(const Fused& f, const Shape& inputShape, double steps = 1.0,
                    double step = 1.0) {
  std::vector<int32_t> raw = randomInts(static_cast<size_t>(shapeNumel(inputShape)), 0, 255, 11);
  std::vector<uint8_t> bytes(raw.begin(), raw.end());
  const Tensor x = Tensor::fromVector(DataType::kUint8, inputShape, bytes);
  const std::vector<Tensor> a = runGraph(f.before, {x}), b = runGraph(f.after, {x});
  int64_t differing = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].dtype(), b[k].dtype());
    EXPECT_EQ(a[k].shape(), b[k].shape());
    const double tolerance = a[k].dtype() == DataType::kFloat32 ? steps * step + 1e-5 : steps;
    for (int64_t i = 0; i < a[k].numel(); ++i) {
      const double d = std::fabs(elementAt(a[k], i) - elementAt(b[k], i));
      EXPECT_LE(d, tolerance) << "output " << k << " element " << i;
      differing += d > 1e-6;
    }
  }
  return differing;
}

// DQ(x: u8) + DQ(W: s8 per channel) [+ DQ(B: int32 at x_scale * w_scale)] -> Conv; what comes
// after is up to each test. x_scale 0.02, w_scale 0.01 / 0.02 / 0.015 / 0.005.
struct ConvModel {
  onnx::ModelProto m = makeModel(13);
  std::vector<float> wScale{0.01f, 0.02f, 0.015f, 0.005f};

  explicit ConvModel(bool bias = true, const std::string& name = "conv",
                     const std::string& in = "x") {
    if (in == "x") {
      addInput(m, "x", {1, 3, 6, 6}, kU8);
      addQuantParams(m, "x", 0.02f, kU8, 120);
      addDequantize(m, "x", "x", "xf");
    }
    addIntInitializer(m, name + "_W", kS8, {4, 3, 3, 3}, randomInts(108, -127, 127, 3));
    addFloatInitializer(m, name + "_W_scale", {4}, wScale);
    addIntInitializer(m, name + "_W_zp", kS8, {4}, {0, 0, 0, 0});
    addDequantize(m, name + "_W", name + "_W", name + "_Wf", "", 0);
    std::vector<std::string> inputs{in == "x" ? "xf" : in, name + "_Wf"};
    if (bias) {
      std::vector<float> biasScale;
      for (float s : wScale) biasScale.push_back(0.02f * s);
      addIntInitializer(m, name + "_B", kI32, {4}, {1000, -2000, 30, 0});
      addFloatInitializer(m, name + "_B_scale", {4}, biasScale);
      addIntInitializer(m, name + "_B_zp", kI32, {4}, {0, 0, 0, 0});
      addDequantize(m, name + "_B", name + "_B", name + "_Bf", "", 0);
      inputs.push_back(name + "_Bf");
    }
    addNode(m, "Conv", inputs, {name + "_out"}, name);
    setInts(lastNode(m), "pads", {1, 1, 1, 1});
  }
};

TEST(QdqFusion, ConvReluQuantizeBecomesOneQConvAndReluIsDropped) {
  ConvModel c;
  addNode(c.m, "Relu", {"conv_out"}, {"r"}, "relu");
  addQuantParams(c.m, "y", 0.05f, kU8, 0);  // zero point 0: u8 saturation is Relu
  addQuantize(c.m, "r", "y", "y", "q");
  addOutput(c.m, "y", {1, 4, 6, 6}, kU8);
  Fused f = fuse(c.m, "relu");
  ASSERT_EQ(opTypes(f.after), Strings{"QConv"});
  const ir::Node& q = f.after.nodes[0];
  EXPECT_EQ(q.domain, "kiln");
  EXPECT_EQ(q.name, "conv");
  EXPECT_FALSE(ir::hasAttr(q, "activation"));
  EXPECT_EQ(opt::fusedFrom(q), (Strings{"conv", "dq_xf", "dq_conv_Wf", "dq_conv_Bf", "relu", "q"}));
  EXPECT_EQ(f.after.value(q.inputs[0]).name, "x");                    // the int8 tensor itself
  EXPECT_EQ(f.after.value(q.inputs[3]).type.dtype, DataType::kInt8);  // weights stay int8
  EXPECT_TRUE(f.after.value(q.inputs[3]).constant.has_value());
  EXPECT_EQ(f.after.value(q.inputs[8]).type.dtype, DataType::kInt32);
  compareRuns(f, {1, 3, 6, 6});
}

// DequantizeLinear and QuantizeLinear without a zero point (0 of uint8): the layer gets zero
// constants.
TEST(QdqFusion, AbsentZeroPointsBecomeZeroConstants) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 3, 6, 6}, kU8);
  addFloatInitializer(m, "x_scale", {}, {0.02f});
  addNode(m, "DequantizeLinear", {"x", "x_scale"}, {"xf"}, "dq_x");
  addIntInitializer(m, "W", kS8, {4, 3, 3, 3}, randomInts(108, -127, 127, 3));
  addQuantParams(m, "W", 0.01f, kS8, 0);
  addDequantize(m, "W", "W", "Wf");
  addNode(m, "Conv", {"xf", "Wf"}, {"c"}, "conv");
  addFloatInitializer(m, "y_scale", {}, {0.04f});
  addNode(m, "QuantizeLinear", {"c", "y_scale"}, {"y"}, "q");
  addOutput(m, "y", {1, 4, 4, 4}, kU8);
  Fused f = fuse(m, "no_zero_points");
  ASSERT_EQ(opTypes(f.after), Strings{"QConv"});
  for (size_t input : {2u, 7u}) {
    const Tensor& zero = *f.after.value(f.after.nodes[0].inputs[input]).constant;
    EXPECT_EQ(zero.dtype(), DataType::kUint8);
    EXPECT_EQ(zero.data<uint8_t>()[0], 0);
  }
  compareRuns(f, {1, 3, 6, 6});
}

TEST(QdqFusion, ReluIsKeptWhenTheZeroPointDoesNotImplyIt) {
  ConvModel c;
  addNode(c.m, "Relu", {"conv_out"}, {"r"}, "relu");
  addQuantParams(c.m, "y", 0.05f, kS8, -20);
  addQuantize(c.m, "r", "y", "y", "q");
  addOutput(c.m, "y", {1, 4, 6, 6}, kS8);
  Fused f = fuse(c.m, "relu_kept");
  ASSERT_EQ(opTypes(f.after), Strings{"QConv"});
  EXPECT_EQ(ir::attrString(f.after.nodes[0], "activation"), "Relu");
  compareRuns(f, {1, 3, 6, 6});
}

TEST(QdqFusion, ClipIsFusedOrDroppedBySaturation) {
  for (const float hi : {6.0f, 100.0f}) {
    SCOPED_TRACE(hi);
    ConvModel c;
    addFloatInitializer(c.m, "lo", {}, {0.0f});
    addFloatInitializer(c.m, "hi", {}, {hi});
    addNode(c.m, "Clip", {"conv_out", "lo", "hi"}, {"r"}, "clip");
    addQuantParams(c.m, "y", 0.05f, kU8, 0);  // u8 covers [0, 12.75]: Clip(0, 100) is implied
    addQuantize(c.m, "r", "y", "y", "q");
    addOutput(c.m, "y", {1, 4, 6, 6}, kU8);
    Fused f = fuse(c.m, "clip" + std::to_string(static_cast<int>(hi)));
    ASSERT_EQ(opTypes(f.after), Strings{"QConv"});
    EXPECT_EQ(ir::attrString(f.after.nodes[0], "activation", ""), hi == 6.0f ? "Clip" : "");
    compareRuns(f, {1, 3, 6, 6});
  }
}

TEST(QdqFusion, QuantizeDequantizeBetweenTwoConvsDisappears) {
  ConvModel c(true, "conv1");
  addQuantParams(c.m, "h", 0.1f, kU8, 128);
  addQuantize(c.m, "conv1_out", "h", "h", "q1");
  addDequantize(c.m, "h", "h", "hf", "dq_h");
  // The second Conv reads the first's dequantized output: 4 input channels.
  addIntInitializer(c.m, "conv2_W", kS8, {2, 4, 1, 1}, {5, -3, 7, 1, -8, 2, 0, 4});
  addFloatInitializer(c.m, "conv2_W_scale", {}, {0.02f});
  addIntInitializer(c.m, "conv2_W_zp", kS8, {}, {0});
  addDequantize(c.m, "conv2_W", "conv2_W", "conv2_Wf");
  addNode(c.m, "Conv", {"hf", "conv2_Wf"}, {"c2"}, "conv2");
  addQuantParams(c.m, "y", 0.03f, kU8, 100);
  addQuantize(c.m, "c2", "y", "y", "q2");
  addOutput(c.m, "y", {1, 2, 6, 6}, kU8);
  Fused f = fuse(c.m, "chain");
  ASSERT_EQ(opTypes(f.after), (Strings{"QConv", "QConv"}));
  EXPECT_EQ(f.after.nodes[1].inputs[0], f.after.nodes[0].outputs[0]);
  EXPECT_EQ(f.after.value(f.after.nodes[0].outputs[0]).type.dtype, DataType::kUint8);
  EXPECT_EQ(opt::fusedFrom(f.after.nodes[1]), (Strings{"conv2", "dq_h", "dq_conv2_Wf", "q2"}));
  compareRuns(f, {1, 3, 6, 6});
}

TEST(QdqFusion, ConvReadByFloatOpsGetsTheFloatOutputForm) {
  ConvModel c;
  addNode(c.m, "Softmax", {"conv_out"}, {"y"}, "softmax");
  addOutput(c.m, "y", {1, 4, 6, 6}, kF32);
  Fused f = fuse(c.m, "float_out");
  ASSERT_EQ(opTypes(f.after), (Strings{"QConv", "Softmax"}));
  const ir::Node& q = f.after.nodes[0];
  EXPECT_EQ(q.inputs.size(), 9u);
  EXPECT_EQ(q.inputs[6], ir::kNoValue);
  EXPECT_EQ(f.after.value(q.outputs[0]).type.dtype, DataType::kFloat32);
  EXPECT_EQ(ir::attrString(q, opt::kInt8FloatOutputAttr),
            "its result is read by float ops (Softmax)");
  compareRuns(f, {1, 3, 6, 6}, 1.0, 1e-5);
}

TEST(QdqFusion, MatMulWithFloatBiasAddBecomesQGemmWithInt32Bias) {
  auto m = makeModel(13);
  addInput(m, "x", {2, 3, 8}, kU8);
  addQuantParams(m, "x", 0.03f, kU8, 128);
  addDequantize(m, "x", "x", "xf");
  addIntInitializer(m, "W", kS8, {8, 5}, randomInts(40, -127, 127, 5));
  addFloatInitializer(m, "W_scale", {5}, {0.01f, 0.02f, 0.005f, 0.03f, 0.012f});
  addIntInitializer(m, "W_zp", kS8, {5}, {0, 0, 0, 0, 0});
  addNode(m, "DequantizeLinear", {"W", "W_scale", "W_zp"}, {"Wf"}, "dq_w");
  setInt(lastNode(m), "axis", 1);
  addNode(m, "MatMul", {"xf", "Wf"}, {"mm"}, "matmul");
  addFloatInitializer(m, "bias", {5}, {0.5f, -0.25f, 0.1f, 0.0f, 1.0f});
  addNode(m, "Add", {"mm", "bias"}, {"biased"}, "add");
  addQuantParams(m, "y", 0.04f, kU8, 120);
  addQuantize(m, "biased", "y", "y", "q");
  addOutput(m, "y", {2, 3, 5}, kU8);
  Fused f = fuse(m, "matmul");
  ASSERT_EQ(opTypes(f.after), Strings{"QGemm"});
  const ir::Node& q = f.after.nodes[0];
  EXPECT_EQ(opt::fusedFrom(q), (Strings{"matmul", "dq_xf", "dq_w", "add", "q"}));
  // 0.5 / (0.03 * 0.01) = 1666.67 rounds to 1667.
  const Tensor& bias = *f.after.value(q.inputs[6]).constant;
  EXPECT_EQ(bias.data<int32_t>()[0], 1667);
  compareRuns(f, {2, 3, 8});
}

// Gemm (a Linear layer of a 2-D input), transB = 1, B per output row, C int32.
onnx::ModelProto gemmModel(int64_t transA = 0) {
  auto m = makeModel(13);
  addInput(m, "x", transA ? std::vector<int64_t>{6, 4} : std::vector<int64_t>{4, 6}, kU8);
  addQuantParams(m, "x", 0.05f, kU8, 100);
  addDequantize(m, "x", "x", "xf");
  addIntInitializer(m, "W", kS8, {3, 6}, randomInts(18, -127, 127, 9));
  addFloatInitializer(m, "W_scale", {3}, {0.01f, 0.02f, 0.04f});
  addIntInitializer(m, "W_zp", kS8, {3}, {0, 0, 0});
  addNode(m, "DequantizeLinear", {"W", "W_scale", "W_zp"}, {"Wf"}, "dq_w");
  setInt(lastNode(m), "axis", 0);
  addIntInitializer(m, "C", kI32, {3}, {100, -50, 7});
  addFloatInitializer(m, "C_scale", {3}, {0.05f * 0.01f, 0.05f * 0.02f, 0.05f * 0.04f});
  addIntInitializer(m, "C_zp", kI32, {3}, {0, 0, 0});
  addDequantize(m, "C", "C", "Cf", "", 0);
  addNode(m, "Gemm", {"xf", "Wf", "Cf"}, {"g"}, "gemm");
  setInt(lastNode(m), "transB", 1);
  if (transA) setInt(lastNode(m), "transA", 1);
  addQuantParams(m, "y", 0.1f, kU8, 128);
  addQuantize(m, "g", "y", "y", "q");
  addOutput(m, "y", {4, 3}, kU8);
  return m;
}

TEST(QdqFusion, GemmWithTransposedWeightAndInt32BiasBecomesQGemm) {
  Fused f = fuse(gemmModel(), "gemm");
  ASSERT_EQ(opTypes(f.after), Strings{"QGemm"});
  const ir::Node& q = f.after.nodes[0];
  EXPECT_EQ(ir::attrInt(q, "transB"), 1);
  EXPECT_THAT(std::vector<int32_t>(f.after.value(q.inputs[6]).constant->data<int32_t>(),
                                   f.after.value(q.inputs[6]).constant->data<int32_t>() + 3),
              ElementsAre(100, -50, 7));  // the DQ's scale is x_scale * w_scale: taken as it is
  compareRuns(f, {4, 6});
}

TEST(QdqFusion, DataMovementRunsOnTheInt8Tensor) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 4, 6, 6}, kU8);
  addQuantParams(m, "p", 0.1f, kU8, 128);
  addDequantize(m, "x", "p", "xf");
  addNode(m, "MaxPool", {"xf"}, {"pooled"}, "pool");
  setInts(lastNode(m), "kernel_shape", {2, 2});
  setInts(lastNode(m), "strides", {2, 2});
  addQuantize(m, "pooled", "p", "pq", "q_pool");
  addDequantize(m, "pq", "p", "pf");
  addInt64Initializer(m, "shape", {1, 36});
  addNode(m, "Reshape", {"pf", "shape"}, {"flat"}, "reshape");
  addQuantize(m, "flat", "p", "fq", "q_flat");
  addDequantize(m, "fq", "p", "ff");
  addDequantize(m, "fq", "p", "ff2", "dq_again");
  addNode(m, "Concat", {"ff", "ff2"}, {"cat"}, "concat");
  setInt(lastNode(m), "axis", 1);
  addQuantize(m, "cat", "p", "y", "q_cat");
  addOutput(m, "y", {1, 72}, kU8);
  Fused f = fuse(m, "moves");
  ASSERT_EQ(opTypes(f.after), (Strings{"MaxPool", "Reshape", "Concat"}));
  for (const ir::Node& n : f.after.nodes)
    EXPECT_EQ(f.after.value(n.outputs[0]).type.dtype, DataType::kUint8) << n.name;
  EXPECT_EQ(opt::fusedFrom(nodeNamed(f.after, "pool")), (Strings{"pool", "q_pool"}));
  EXPECT_EQ(compareRuns(f, {1, 4, 6, 6}), 0);  // exact
}

// Every op the rewrite moves onto the int8 tensor has an 8-bit kernel that gives the same bytes;
// a linear Resize interpolates, so it stays float.
TEST(QdqFusion, EachDataMovementOpRunsOnInt8) {
  struct Case {
    std::string op;
    std::vector<int64_t> outShape;
    bool moves = true;
  };
  for (const Case& c : std::vector<Case>{{"Transpose", {1, 4, 6, 2}},
                                         {"Flatten", {1, 48}},
                                         {"Squeeze", {4, 2, 6}},
                                         {"Unsqueeze", {1, 1, 4, 2, 6}},
                                         {"Slice", {1, 2, 2, 6}},
                                         {"Resize", {1, 4, 4, 12}},
                                         {"ResizeLinear", {1, 4, 4, 12}, false}}) {
    SCOPED_TRACE(c.op);
    auto m = makeModel(13);
    addInput(m, "x", {1, 4, 2, 6}, kU8);
    addQuantParams(m, "p", 0.1f, kU8, 128);
    addDequantize(m, "x", "p", "xf");
    const std::string op = c.op == "ResizeLinear" ? "Resize" : c.op;
    if (op == "Transpose") {
      addNode(m, op, {"xf"}, {"r"}, "op");
      setInts(lastNode(m), "perm", {0, 1, 3, 2});
    } else if (op == "Flatten") {
      addNode(m, op, {"xf"}, {"r"}, "op");
    } else if (op == "Squeeze" || op == "Unsqueeze") {
      addInt64Initializer(m, "axes", {0});
      addNode(m, op, {"xf", "axes"}, {"r"}, "op");
    } else if (op == "Slice") {
      addInt64Initializer(m, "starts", {1});
      addInt64Initializer(m, "ends", {3});
      addInt64Initializer(m, "axes", {1});
      addNode(m, op, {"xf", "starts", "ends", "axes"}, {"r"}, "op");
    } else {
      addFloatInitializer(m, "scales", {4}, {1.0f, 1.0f, 2.0f, 2.0f});
      addNode(m, op, {"xf", "", "scales"}, {"r"}, "op");
      if (c.op == "ResizeLinear") {
        auto* a = lastNode(m)->add_attribute();
        a->set_name("mode");
        a->set_type(onnx::AttributeProto::STRING);
        a->set_s("linear");
      }
    }
    addQuantize(m, "r", "p", "y", "q");
    addOutput(m, "y", c.outShape, kU8);
    Fused f = fuse(m, "move_" + c.op);
    if (!c.moves) {
      EXPECT_EQ(opTypes(f.after), (Strings{"DequantizeLinear", op, "QuantizeLinear"}));
      continue;
    }
    ASSERT_EQ(opTypes(f.after), Strings{op});
    EXPECT_EQ(f.after.value(f.after.nodes[0].inputs[0]).type.dtype, DataType::kUint8);
    EXPECT_EQ(compareRuns(f, {1, 4, 2, 6}), 0);
  }
}

TEST(QdqFusion, DataMovementWithDifferentParametersStaysFloat) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 4, 6, 6}, kU8);
  addQuantParams(m, "p", 0.1f, kU8, 128);
  addQuantParams(m, "o", 0.2f, kU8, 128);
  addDequantize(m, "x", "p", "xf");
  addNode(m, "MaxPool", {"xf"}, {"pooled"}, "pool");
  setInts(lastNode(m), "kernel_shape", {2, 2});
  addQuantize(m, "pooled", "o", "y", "q");
  addOutput(m, "y", {1, 4, 5, 5}, kU8);
  Fused f = fuse(m, "moves_differ");
  EXPECT_EQ(opTypes(f.after), (Strings{"DequantizeLinear", "MaxPool", "QuantizeLinear"}));
}

// A residual block as onnxruntime quantizes it: Conv -> Q -> DQ, read by a second Conv and by
// the Add of the two (each input DQ'd, the sum Q'd), then a global average pool between DQ and Q.
onnx::ModelProto residualBlock() {
  ConvModel c(true, "conv1");
  addQuantParams(c.m, "h", 0.1f, kU8, 128);
  addQuantize(c.m, "conv1_out", "h", "h", "q1");
  addDequantize(c.m, "h", "h", "hf", "dq_h");
  addIntInitializer(c.m, "conv2_W", kS8, {4, 4, 1, 1}, randomInts(16, -100, 100, 4));
  addQuantParams(c.m, "conv2_W", 0.02f, kS8, 0);
  addDequantize(c.m, "conv2_W", "conv2_W", "conv2_Wf");
  addNode(c.m, "Conv", {"hf", "conv2_Wf"}, {"c2"}, "conv2");
  addQuantParams(c.m, "c2", 0.08f, kU8, 120);
  addQuantize(c.m, "c2", "c2", "c2q", "q2");
  addDequantize(c.m, "c2q", "c2", "c2f", "dq_c2");
  addNode(c.m, "Add", {"hf", "c2f"}, {"sum"}, "add");
  addQuantParams(c.m, "s", 0.15f, kU8, 125);
  addQuantize(c.m, "sum", "s", "sq", "q_sum");
  addDequantize(c.m, "sq", "s", "sf", "dq_sum");
  addNode(c.m, "GlobalAveragePool", {"sf"}, {"pooled"}, "gap");
  addQuantParams(c.m, "y", 0.05f, kU8, 128);
  addQuantize(c.m, "pooled", "y", "y", "q_y");
  addOutput(c.m, "y", {1, 4, 1, 1}, kU8);
  return c.m;
}

TEST(QdqFusion, ResidualBlockRunsInt8FromEndToEnd) {
  Fused f = fuse(residualBlock(), "residual");
  ASSERT_EQ(opTypes(f.after),
            (Strings{"QConv", "QConv", "QLinearAdd", "QLinearGlobalAveragePool"}));
  const ir::Node& add = nodeNamed(f.after, "add");
  EXPECT_EQ(add.inputs[0], f.after.nodes[0].outputs[0]);
  EXPECT_EQ(add.inputs[3], f.after.nodes[1].outputs[0]);
  EXPECT_EQ(opt::fusedFrom(add),
            (Strings{"add", "dq_h", "dq_c2", "q_sum"}));  // dq_h: its last reader
  EXPECT_EQ(opt::fusedFrom(nodeNamed(f.after, "gap")), (Strings{"gap", "dq_sum", "q_y"}));
  compareRuns(f, {1, 3, 6, 6});
}

// With the layout passes (opt/nhwc_int8_layout.cpp), where this CPU has the direct kernel: conv2
// (4 input channels) runs channels-last, conv1 (3) does not; the Add reads conv1's output through
// a Transpose and stays channels-last into the pool, whose [1, 1, 1, 4] output is transposed
// back. The same bytes as the unfused graph.
TEST(QdqFusion, ResidualBlockRunsChannelsLastFromTheSecondConv) {
  Fused f = fuse(residualBlock(), "residual_nhwc", true);
  if (!cpu::qconvNhwcAvailable()) {
    ASSERT_EQ(opTypes(f.after),
              (Strings{"QConv", "QConv", "QLinearAdd", "QLinearGlobalAveragePool"}));
  } else {
    ASSERT_EQ(opTypes(f.after), (Strings{"QConv", "Transpose", "QConv", "QLinearAdd",
                                         "QLinearGlobalAveragePool", "Transpose"}));
    for (const char* name : {"conv2", "add", "gap"}) {
      const ir::Node& n = nodeNamed(f.after, name);
      EXPECT_EQ(ir::attrInt(n, "channels_last", 0), n.opType == "QLinearAdd" ? 0 : 1) << name;
    }
    EXPECT_EQ(ir::attrInt(nodeNamed(f.after, "conv1"), "channels_last", 0), 0);
  }
  compareRuns(f, {1, 3, 6, 6});
  const Fused plain = fuse(residualBlock(), "residual_plain");
  std::vector<int32_t> raw = randomInts(3 * 6 * 6, 0, 255, 12);
  const Tensor x = Tensor::fromVector(DataType::kUint8, {1, 3, 6, 6},
                                      std::vector<uint8_t>(raw.begin(), raw.end()));
  const Tensor a = runGraph(f.after, {x})[0], b = runGraph(plain.after, {x})[0];
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(std::vector<uint8_t>(a.data<uint8_t>(), a.data<uint8_t>() + a.numel()),
            std::vector<uint8_t>(b.data<uint8_t>(), b.data<uint8_t>() + b.numel()));
}

// The quantized elementwise ops give the same bytes as DQ -> float op -> Q.
TEST(QdqFusion, QuantizedAddMulAndPoolAreExact) {
  for (const std::string op : {"Add", "Mul", "GlobalAveragePool"}) {
    SCOPED_TRACE(op);
    auto m = makeModel(13);
    addInput(m, "x", {1, 3, 5, 7}, kU8);
    addQuantParams(m, "x", 0.037f, kU8, 131);
    addDequantize(m, "x", "x", "xf");
    if (op == "GlobalAveragePool") {
      addNode(m, op, {"xf"}, {"r"}, "op");
    } else {
      addIntInitializer(m, "k", kS8, {3, 1, 1}, {-90, 17, 120});
      addQuantParams(m, "k", 0.011f, kS8, 3);
      addDequantize(m, "k", "k", "kf");
      addNode(m, op, {"xf", "kf"}, {"r"}, "op");
    }
    addQuantParams(m, "y", op == "Mul" ? 0.013f : 0.029f, kS8, -4);
    addQuantize(m, "r", "y", "y", "q");
    addOutput(m, "y",
              op == "GlobalAveragePool" ? std::vector<int64_t>{1, 3, 1, 1}
                                        : std::vector<int64_t>{1, 3, 5, 7},
              kS8);
    Fused f = fuse(m, "exact_" + op);
    ASSERT_EQ(opTypes(f.after), Strings{"QLinear" + op});
    EXPECT_EQ(compareRuns(f, {1, 3, 5, 7}), 0);
  }
}

// DQ -> activation -> Q becomes one table lookup with the chain's bytes: each activation, u8 and
// s8 input and output (the table indexed by the input's bits), Clip with constant bounds.
TEST(QdqFusion, ActivationsBetweenDequantizeAndQuantizeBecomeATableWithTheSameBytes) {
  for (const std::string op : {"Sigmoid", "Tanh", "HardSwish", "LeakyRelu", "Exp", "Clip"}) {
    for (int type : {kU8, kS8}) {
      SCOPED_TRACE(op + (type == kU8 ? " u8" : " s8"));
      auto m = makeModel(13);
      addInput(m, "x", {1, 3, 5, 7}, kU8);
      addQuantParams(m, "x", 0.037f, kU8, 131);
      addDequantize(m, "x", "x", "xf");
      if (op == "Clip") {
        addFloatInitializer(m, "lo", {}, {-0.5f});
        addFloatInitializer(m, "hi", {}, {1.25f});
        addNode(m, op, {"xf", "lo", "hi"}, {"r"}, "act");
      } else {
        addNode(m, op, {"xf"}, {"r"}, "act");
      }
      addQuantParams(m, "y", 0.013f, type, type == kU8 ? 7 : -4);
      addQuantize(m, "r", "y", "y", "q");
      addOutput(m, "y", {1, 3, 5, 7}, type);
      Fused f = fuse(m, "lookup_" + op + std::to_string(type));
      ASSERT_EQ(opTypes(f.after), Strings{"QLinearLookup"});
      EXPECT_EQ(opt::fusedFrom(f.after.nodes[0]), (Strings{"act", "dq_xf", "q"}));
      EXPECT_EQ(compareRuns(f, {1, 3, 5, 7}), 0);
    }
  }
}

// DQ -> Concat -> Q whose inputs have other parameters than the output: one QLinearConcat that
// requantizes each input through a table, the chain's bytes (u8 and s8 outputs, axes 1 and -1).
TEST(QdqFusion, ConcatOfDifferentlyQuantizedInputsIsExact) {
  for (int type : {kU8, kS8}) {
    for (int64_t axis : {1, -1}) {
      SCOPED_TRACE(std::to_string(type) + " axis " + std::to_string(axis));
      auto m = makeModel(13);
      addInput(m, "x", {1, 3, 5, 7}, kU8);
      addQuantParams(m, "x", 0.037f, kU8, 131);
      addDequantize(m, "x", "x", "xf");
      const Shape k = axis == 1 ? Shape{1, 2, 5, 7} : Shape{1, 3, 5, 4};
      addIntInitializer(m, "k", kS8, k,
                        randomInts(static_cast<size_t>(shapeNumel(k)), -128, 127, 5));
      addQuantParams(m, "k", 0.011f, kS8, 3);
      addDequantize(m, "k", "k", "kf");
      addNode(m, "Concat", {"xf", "kf"}, {"r"}, "concat");
      setInt(lastNode(m), "axis", axis);
      addQuantParams(m, "y", 0.029f, type, type == kU8 ? 100 : -4);
      addQuantize(m, "r", "y", "y", "q");
      addOutput(m, "y",
                axis == 1 ? std::vector<int64_t>{1, 5, 5, 7} : std::vector<int64_t>{1, 3, 5, 11},
                type);
      Fused f = fuse(m, "concat_" + std::to_string(type) + std::to_string(axis));
      ASSERT_EQ(opTypes(f.after), Strings{"QLinearConcat"});
      EXPECT_EQ(compareRuns(f, {1, 3, 5, 7}), 0);
    }
  }
}

// A chain of elementwise ops of one tensor between the DQ and the Q, as BERT's GELU has it (DQ ->
// Div by a DQ'd constant -> Erf -> Q), is one table too; a chain whose middle value has another
// reader is not.
TEST(QdqFusion, ChainsOfElementwiseOpsWithScalarsBecomeOneTable) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 3, 5, 7}, kU8);
  addQuantParams(m, "x", 0.037f, kU8, 131);
  addDequantize(m, "x", "x", "xf");
  addIntInitializer(m, "c", kU8, {}, {200});
  addQuantParams(m, "c", 0.00707f, kU8, 0);
  addDequantize(m, "c", "c", "cf");
  addNode(m, "Div", {"xf", "cf"}, {"d"}, "div");
  addNode(m, "Erf", {"d"}, {"e"}, "erf");
  addFloatInitializer(m, "two", {}, {2.0f});
  addNode(m, "Sub", {"two", "e"}, {"s"}, "sub");  // the chain at input 1
  addQuantParams(m, "y", 0.009f, kU8, 3);
  addQuantize(m, "s", "y", "y", "q");
  addOutput(m, "y", {1, 3, 5, 7}, kU8);
  Fused f = fuse(m, "chain");
  ASSERT_EQ(opTypes(f.after), Strings{"QLinearLookup"});
  EXPECT_EQ(opt::fusedFrom(f.after.nodes[0]), (Strings{"div", "dq_xf", "erf", "sub", "q"}));
  EXPECT_EQ(compareRuns(f, {1, 3, 5, 7}), 0);

  addOutput(m, "e", {1, 3, 5, 7}, kF32);  // Erf's output read outside the chain
  Fused kept = fuse(m, "chain_read_twice");
  EXPECT_THAT(opTypes(kept.after), Contains("Erf"));
  EXPECT_EQ(compareRuns(kept, {1, 3, 5, 7}), 0);
}

// SiLU as the quantizer writes it: x's DQ feeds the Sigmoid and the Mul, so the lookup reads x and
// the QLinearMul both.
TEST(QdqFusion, QuantizedSiluIsALookupAndAQuantizedMul) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 3, 5, 7}, kU8);
  addQuantParams(m, "x", 0.037f, kU8, 131);
  addDequantize(m, "x", "x", "xf");
  addNode(m, "Sigmoid", {"xf"}, {"s"}, "sigmoid");
  addQuantParams(m, "sq", 1.0f / 255, kU8, 0);
  addQuantize(m, "s", "sq", "sq", "q_s");
  addDequantize(m, "sq", "sq", "sf");
  addNode(m, "Mul", {"xf", "sf"}, {"r"}, "mul");
  addQuantParams(m, "y", 0.02f, kU8, 14);
  addQuantize(m, "r", "y", "y", "q");
  addOutput(m, "y", {1, 3, 5, 7}, kU8);
  Fused f = fuse(m, "silu");
  ASSERT_EQ(opTypes(f.after), (Strings{"QLinearLookup", "QLinearMul"}));
  EXPECT_EQ(nodeNamed(f.after, "mul").inputs[0], f.after.nodes[0].inputs[0]);
  EXPECT_EQ(compareRuns(f, {1, 3, 5, 7}), 0);
}

// Each reason a layer stays float32, as kiln build --verbose reports it.
std::string refusalOf(const onnx::ModelProto& m, const std::string& tag, const std::string& layer) {
  Fused f = fuse(m, tag);
  const ir::Node& n = nodeNamed(f.after, layer);
  EXPECT_NE(n.opType, "QConv");
  return ir::attrString(n, opt::kInt8RefusalAttr, "");
}

TEST(QdqFusionRefusal, WeightDequantizedFromAGraphInput) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 3, 6, 6}, kU8);
  addInput(m, "w", {4, 3, 3, 3}, kS8);
  addQuantParams(m, "x", 0.02f, kU8, 120);
  addQuantParams(m, "w", 0.01f, kS8, 0);
  addDequantize(m, "x", "x", "xf");
  addDequantize(m, "w", "w", "wf");
  addNode(m, "Conv", {"xf", "wf"}, {"y"}, "conv");
  addOutput(m, "y", {1, 4, 4, 4}, kF32);
  EXPECT_EQ(refusalOf(m, "refuse_w", "conv"),
            "weight DQ not constant (its input is computed at run time)");
}

TEST(QdqFusionRefusal, FloatInput) {
  ConvModel c(false, "conv", "xin");
  addInput(c.m, "xin", {1, 3, 6, 6}, kF32);
  addOutput(c.m, "conv_out", {1, 4, 6, 6}, kF32);
  EXPECT_EQ(refusalOf(c.m, "refuse_x", "conv"),
            "input X is not dequantized (no DequantizeLinear before it)");
}

TEST(QdqFusionRefusal, PerChannelActivationScale) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 3, 6, 6}, kU8);
  addFloatInitializer(m, "x_scale", {3}, {0.1f, 0.2f, 0.3f});
  addIntInitializer(m, "x_zp", kU8, {3}, {1, 2, 3});
  addDequantize(m, "x", "x", "xf");
  addIntInitializer(m, "W", kS8, {4, 3, 1, 1}, randomInts(12, -10, 10, 1));
  addQuantParams(m, "W", 0.01f, kS8, 0);
  addDequantize(m, "W", "W", "Wf");
  addNode(m, "Conv", {"xf", "Wf"}, {"y"}, "conv");
  addOutput(m, "y", {1, 4, 6, 6}, kF32);
  EXPECT_THAT(refusalOf(m, "refuse_xs", "conv"), HasSubstr("input X scale is not a scalar"));
}

TEST(QdqFusionRefusal, SixteenBitActivations) {
  auto m = makeModel(21);
  addInput(m, "x", {1, 3, 6, 6}, onnx::TensorProto::UINT16);
  addFloatInitializer(m, "x_scale", {}, {0.001f});
  addIntInitializer(m, "x_zp", onnx::TensorProto::UINT16, {}, {32768});
  addDequantize(m, "x", "x", "xf");
  addIntInitializer(m, "W", kS8, {4, 3, 1, 1}, randomInts(12, -10, 10, 1));
  addQuantParams(m, "W", 0.01f, kS8, 0);
  addDequantize(m, "W", "W", "Wf");
  addNode(m, "Conv", {"xf", "Wf"}, {"y"}, "conv");
  addOutput(m, "y", {1, 4, 6, 6}, kF32);
  EXPECT_EQ(refusalOf(m, "refuse_u16", "conv"),
            "input X is dequantized from uint16, not int8 or uint8");
}

TEST(QdqFusionRefusal, GemmWithTransposedA) {
  EXPECT_EQ(refusalOf(gemmModel(1), "refuse_ta", "gemm"),
            "Gemm with transA = 1 is not fused (kiln::QGemm takes A as [M, K])");
}

TEST(QdqFusion, ActivationKilnCannotFuseLeavesTheFloatOutputFormWithItsReason) {
  ConvModel c;
  addNode(c.m, "Tanh", {"conv_out"}, {"t"}, "tanh");
  addQuantParams(c.m, "y", 0.01f, kU8, 128);
  addQuantize(c.m, "t", "y", "y", "q");
  addOutput(c.m, "y", {1, 4, 6, 6}, kU8);
  Fused f = fuse(c.m, "tanh");
  ASSERT_EQ(opTypes(f.after), (Strings{"QConv", "Tanh", "QuantizeLinear"}));
  EXPECT_EQ(ir::attrString(f.after.nodes[0], opt::kInt8FloatOutputAttr),
            "activation between Conv and Q is Tanh: not fused");
  compareRuns(f, {1, 3, 6, 6});
}

TEST(QdqFusion, PerChannelOutputQuantizerLeavesTheFloatOutputForm) {
  ConvModel c;
  addFloatInitializer(c.m, "y_scale", {4}, {0.1f, 0.2f, 0.1f, 0.2f});
  addIntInitializer(c.m, "y_zp", kU8, {4}, {128, 128, 128, 128});
  addQuantize(c.m, "conv_out", "y", "y", "q");
  addOutput(c.m, "y", {1, 4, 6, 6}, kU8);
  Fused f = fuse(c.m, "q_per_channel");
  ASSERT_EQ(opTypes(f.after), (Strings{"QConv", "QuantizeLinear"}));
  EXPECT_THAT(ir::attrString(f.after.nodes[0], opt::kInt8FloatOutputAttr),
              HasSubstr("output Q scale is not a scalar"));
  compareRuns(f, {1, 3, 6, 6});
}

TEST(QdqFusion, FloatModelsAreLeftAlone) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 3, 4, 4});
  addFloatInitializer(m, "W", {2, 3, 1, 1}, {1, 2, 3, 4, 5, 6});
  addNode(m, "Conv", {"x", "W"}, {"y"}, "conv");
  addOutput(m, "y", {1, 2, 4, 4});
  Fused f = fuse(m, "float_model");
  ASSERT_EQ(f.after.nodes.size(), 1u);
  EXPECT_FALSE(ir::hasAttr(f.after.nodes[0], opt::kInt8RefusalAttr));
}

}  // namespace
}  // namespace kiln
