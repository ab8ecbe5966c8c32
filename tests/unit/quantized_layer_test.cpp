// The reference kernels of kiln::QConv and kiln::QGemm on one-node models, against values worked
// out by hand in each test (docs/precision.md gives the arithmetic), and QConv against
// QLinearConv, whose requantization it must reproduce exactly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kiln/session.h"
#include "quantized_model_builder.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using namespace kiln::testing;

constexpr int kU8 = onnx::TensorProto::UINT8;
constexpr int kS8 = onnx::TensorProto::INT8;
constexpr int kI32 = onnx::TensorProto::INT32;

// A model of one kiln-domain node whose only graph input is "x".
onnx::ModelProto kilnModel() {
  auto m = makeModel(13);
  auto* op = m.add_opset_import();
  op->set_domain("kiln");
  op->set_version(1);
  return m;
}

void setString(onnx::NodeProto* node, const std::string& name, const std::string& value) {
  auto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(value);
}

void setFloats(onnx::NodeProto* node, const std::string& name, const std::vector<float>& values) {
  auto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float v : values) a->add_floats(v);
}

template <typename T>
std::vector<T> valuesOf(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

Tensor runOne(const onnx::ModelProto& m, const std::string& tag, const Tensor& x) {
  Session session(saveModel(m, tempDir("qlayer_" + tag) / "model.onnx"));
  return session.run({{"x", x}})[0].second;
}

// A [2, 3] (u8, zero point 10, scale 0.5) times B [3, 2] (s8, scales 0.25 and 0.5 per column)
// plus C = [4, -8]: sums + C = [[-66, 152], [-1246, 1462]], real values [[-8.25, 38],
// [-155.75, 365.5]]; at y_scale 2, zero point 100: [[96, 119], [22, 255 (saturated)]].
struct GemmCase {
  bool transB = false;
  float alpha = 1.0f;
  std::string activation;
  std::vector<float> params;
  bool quantizedOutput = true;

  onnx::ModelProto model() const {
    auto m = kilnModel();
    addInput(m, "x", {2, 3}, kU8);
    addQuantParams(m, "a", 0.5f, kU8, 10);
    if (transB) {
      addIntInitializer(m, "B", kS8, {2, 3}, {1, 3, -5, -2, 4, 6});
    } else {
      addIntInitializer(m, "B", kS8, {3, 2}, {1, -2, 3, 4, -5, 6});
    }
    addFloatInitializer(m, "b_scale", {2}, {0.25f, 0.5f});
    addIntInitializer(m, "b_zp", kS8, {2}, {0, 0});
    addIntInitializer(m, "C", kI32, {2}, {4, -8});
    addQuantParams(m, "y", 2.0f, kU8, 100);
    std::vector<std::string> inputs{"x", "a_scale", "a_zp", "B", "b_scale", "b_zp", "C"};
    if (quantizedOutput) inputs.insert(inputs.end(), {"y_scale", "y_zp"});
    addNode(m, "QGemm", inputs, {"y"}, "qgemm");
    auto* node = lastNode(m);
    node->set_domain("kiln");
    if (transB) setInt(node, "transB", 1);
    if (alpha != 1.0f) setFloat(node, "alpha", alpha);
    if (!activation.empty()) setString(node, "activation", activation);
    if (!params.empty()) setFloats(node, "activation_params", params);
    addOutput(m, "y", {2, 2}, quantizedOutput ? kU8 : onnx::TensorProto::FLOAT);
    return m;
  }
  Tensor run(const std::string& tag) const {
    return runOne(
        model(), tag,
        Tensor::fromVector(DataType::kUint8, {2, 3}, std::vector<uint8_t>{10, 20, 30, 0, 5, 255}));
  }
};

TEST(QGemmKernel, RequantizesPerColumnWithBias) {
  EXPECT_THAT(valuesOf<uint8_t>(GemmCase{}.run("plain")), ElementsAre(96, 119, 22, 255));
}

TEST(QGemmKernel, TransposedBGivesTheSameResult) {
  GemmCase c;
  c.transB = true;
  EXPECT_THAT(valuesOf<uint8_t>(c.run("transb")), ElementsAre(96, 119, 22, 255));
}

TEST(QGemmKernel, AlphaScalesTheSumAndTheBias) {
  // Real values doubled: [[-16.5, 76], [-311.5, 731]] / 2 + 100 -> 91.75 rounds to 92.
  GemmCase c;
  c.alpha = 2.0f;
  EXPECT_THAT(valuesOf<uint8_t>(c.run("alpha")), ElementsAre(92, 138, 0, 255));
}

TEST(QGemmKernel, ReluBoundsTheQuantizedValueAtTheZeroPoint) {
  GemmCase c;
  c.activation = "Relu";
  EXPECT_THAT(valuesOf<uint8_t>(c.run("relu")), ElementsAre(100, 119, 100, 255));
}

TEST(QGemmKernel, LeakyReluAppliesToTheRealValue) {
  // [[-4.125, 38], [-77.875, 365.5]] / 2 = [[-2.0625, 19], [-38.94, 182.75]] -> + 100.
  GemmCase c;
  c.activation = "LeakyRelu";
  c.params = {0.5f};
  EXPECT_THAT(valuesOf<uint8_t>(c.run("leaky")), ElementsAre(98, 119, 61, 255));
}

TEST(QGemmKernel, FloatOutputWithoutYScale) {
  GemmCase c;
  c.quantizedOutput = false;
  EXPECT_THAT(valuesOf<float>(c.run("float")), ElementsAre(-8.25f, 38.0f, -155.75f, 365.5f));
}

// X [1, 1, 3, 3] = 0..8 (u8, zero point 2, scale 0.5), W [2, 1, 2, 2] = [[1, 0], [0, -1]] and
// [[2, 1], [1, 2]] (s8, scales 1 and 0.5), B = [1, -3]: sums + B = [-3 x 4] and [-3, 3, 15, 21],
// real values [-1.5 x 4] and [-0.75, 0.75, 3.75, 5.25]; at y_scale 0.25, zero point 10 (s8):
// [4 x 4] and [7, 13, 25, 31].
onnx::ModelProto convModel(const std::string& activation, const std::vector<float>& params,
                           bool quantizedOutput) {
  auto m = kilnModel();
  addInput(m, "x", {1, 1, 3, 3}, kU8);
  addQuantParams(m, "x", 0.5f, kU8, 2);
  addIntInitializer(m, "W", kS8, {2, 1, 2, 2}, {1, 0, 0, -1, 2, 1, 1, 2});
  addFloatInitializer(m, "w_scale", {2}, {1.0f, 0.5f});
  addIntInitializer(m, "w_zp", kS8, {2}, {0, 0});
  addQuantParams(m, "y", 0.25f, kS8, 10);
  addIntInitializer(m, "B", kI32, {2}, {1, -3});
  std::vector<std::string> inputs{"x",    "x_scale", "x_zp", "W", "w_scale",
                                  "w_zp", "y_scale", "y_zp", "B"};
  if (!quantizedOutput) inputs[6] = inputs[7] = "";
  addNode(m, "QConv", inputs, {"y"}, "qconv");
  auto* node = lastNode(m);
  node->set_domain("kiln");
  if (!activation.empty()) setString(node, "activation", activation);
  if (!params.empty()) setFloats(node, "activation_params", params);
  addOutput(m, "y", {1, 2, 2, 2}, quantizedOutput ? kS8 : onnx::TensorProto::FLOAT);
  return m;
}

Tensor convInput() {
  return Tensor::fromVector(DataType::kUint8, {1, 1, 3, 3},
                            std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 6, 7, 8});
}

TEST(QConvKernel, RequantizesPerChannelWithBias) {
  EXPECT_THAT(valuesOf<int8_t>(runOne(convModel("", {}, true), "conv", convInput())),
              ElementsAre(4, 4, 4, 4, 7, 13, 25, 31));
}

TEST(QConvKernel, ClipBoundsTheRealValue) {
  // Clip(0, 1): [0 x 4] and [0, 0.75, 1, 1] -> 10 + value / 0.25.
  EXPECT_THAT(valuesOf<int8_t>(runOne(convModel("Clip", {0.0f, 1.0f}, true), "clip", convInput())),
              ElementsAre(10, 10, 10, 10, 10, 13, 14, 14));
}

TEST(QConvKernel, FloatOutputWithoutYScale) {
  EXPECT_THAT(valuesOf<float>(runOne(convModel("", {}, false), "convf", convInput())),
              ElementsAre(-1.5f, -1.5f, -1.5f, -1.5f, -0.75f, 0.75f, 3.75f, 5.25f));
}

TEST(QConvKernel, SigmoidOutputIsQuantizedFromTheActivatedRealValue) {
  // sigmoid(-1.5) = 0.1824 -> 0.73 steps -> 11; sigmoid(5.25) = 0.9948 -> 3.98 -> 14.
  EXPECT_THAT(valuesOf<int8_t>(runOne(convModel("Sigmoid", {}, true), "sigmoid", convInput())),
              ElementsAre(11, 11, 11, 11, 11, 13, 14, 14));
}

TEST(QConvKernel, BiasOfTheWrongLengthIsRefusedNamingTheInput) {
  auto m = convModel("", {}, true);
  m.mutable_graph()->mutable_initializer(7)->add_int32_data(5);
  m.mutable_graph()->mutable_initializer(7)->set_dims(0, 3);
  try {
    runOne(m, "badbias", convInput());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("qconv"));
    // The integer-GEMM kernel and the reference word it differently; both name the input and the
    // count.
    EXPECT_THAT(e.what(), HasSubstr("(input 8) must"));
    EXPECT_THAT(e.what(), HasSubstr("per output channel (2), got int32[3]"));
  }
}

// QConv without activation is QLinearConv: same inputs, same bytes out, on random data with
// padding, stride and groups.
TEST(QConvKernel, MatchesQLinearConvExactly) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> u8(0, 255), s8(-128, 127);
  std::vector<int32_t> w(4 * 2 * 3 * 3), bias(4);
  for (int32_t& v : w) v = s8(rng);
  for (int32_t& v : bias) v = s8(rng) * 20;
  std::vector<uint8_t> x(1 * 4 * 7 * 6);
  for (uint8_t& v : x) v = static_cast<uint8_t>(u8(rng));
  std::vector<int8_t> outputs[2];
  for (int k = 0; k < 2; ++k) {
    auto m = kilnModel();
    addInput(m, "x", {1, 4, 7, 6}, kU8);
    addQuantParams(m, "x", 0.037f, kU8, 131);
    addIntInitializer(m, "W", kS8, {4, 2, 3, 3}, w);
    addFloatInitializer(m, "w_scale", {4}, {0.011f, 0.0073f, 0.02f, 0.0051f});
    addIntInitializer(m, "w_zp", kS8, {4}, {0, 0, 0, 0});
    addQuantParams(m, "y", 0.093f, kS8, -7);
    addIntInitializer(m, "B", kI32, {4}, bias);
    addNode(m, k == 0 ? "QConv" : "QLinearConv",
            {"x", "x_scale", "x_zp", "W", "w_scale", "w_zp", "y_scale", "y_zp", "B"}, {"y"},
            "conv");
    if (k == 0) lastNode(m)->set_domain("kiln");
    setInt(lastNode(m), "group", 2);
    setInts(lastNode(m), "pads", {1, 0, 1, 2});
    setInts(lastNode(m), "strides", {2, 1});
    addOutput(m, "y", {1, 4, 4, 6}, kS8);
    outputs[k] = valuesOf<int8_t>(
        runOne(m, k == 0 ? "rq" : "rql", Tensor::fromVector(DataType::kUint8, {1, 4, 7, 6}, x)));
  }
  EXPECT_THAT(outputs[0], ElementsAreArray(outputs[1]));
}

// A = x [2] = {10, 200} at 0.1 (zero point 0): 1 and 20; B [1] = {50} at 0.2, zero point 40: 2.
// C at 0.5, zero point 10: Add 3 and 22 -> 16 and 54; Mul 2 and 40 -> 14 and 90.
Tensor binaryRun(const std::string& op) {
  auto m = kilnModel();
  addInput(m, "x", {2}, kU8);
  addQuantParams(m, "a", 0.1f, kU8, 0);
  addIntInitializer(m, "B", kU8, {1}, {50});
  addQuantParams(m, "b", 0.2f, kU8, 40);
  addQuantParams(m, "c", 0.5f, kS8, 10);
  addNode(m, op, {"x", "a_scale", "a_zp", "B", "b_scale", "b_zp", "c_scale", "c_zp"}, {"y"},
          "binary");
  lastNode(m)->set_domain("kiln");
  addOutput(m, "y", {2}, kS8);
  return runOne(m, op, Tensor::fromVector(DataType::kUint8, {2}, std::vector<uint8_t>{10, 200}));
}

TEST(QLinearElementwiseKernel, AddAndMulBroadcastAndRequantize) {
  EXPECT_THAT(valuesOf<int8_t>(binaryRun("QLinearAdd")), ElementsAre(16, 54));
  EXPECT_THAT(valuesOf<int8_t>(binaryRun("QLinearMul")), ElementsAre(14, 90));
}

// The DequantizeLinear -> Add/Mul -> QuantizeLinear arithmetic in double, rounded to float after
// each step as the float ops round: what the eight-lane kernel must reproduce byte for byte.
int32_t chainReference(bool mul, int32_t a, float sa, int32_t za, int32_t b, float sb, int32_t zb,
                       float sc, int32_t zc, int32_t lowest, int32_t highest) {
  const float x = static_cast<float>((a - za) * static_cast<double>(sa));
  const float y = static_cast<float>((b - zb) * static_cast<double>(sb));
  const float r = mul ? x * y : x + y;
  const float scaled = static_cast<float>(static_cast<double>(r) / sc);
  return static_cast<int32_t>(std::clamp(std::nearbyint(static_cast<double>(scaled)) + zc,
                                         double(lowest), double(highest)));
}

struct BinaryCase {
  bool mul;
  int typeA, typeB, typeC;
  Shape shapeB;
};

// Random 8-bit operands over a [2, 3, 5, 7] output (runs of 7 and 105 elements: vector body and
// scalar tail), B full-size, per-channel broadcast or a scalar, every signedness of A, B and C.
TEST(QLinearElementwiseKernel, VectorRunsMatchTheDequantizeOpQuantizeChain) {
  std::mt19937 rng(7);
  const Shape shapeA{2, 3, 5, 7};
  int cases = 0;
  for (bool mul : {false, true}) {
    for (int ta : {kU8, kS8}) {
      for (int tb : {kU8, kS8}) {
        for (int tc : {kU8, kS8}) {
          for (const Shape& sbShape : {Shape{2, 3, 5, 7}, Shape{1, 3, 1, 1}, Shape{1}}) {
            auto range = [](int t) { return t == kU8 ? std::pair{0, 255} : std::pair{-128, 127}; };
            auto draw = [&](int t, int64_t count) {
              std::uniform_int_distribution<int> d(range(t).first, range(t).second);
              std::vector<int32_t> v(static_cast<size_t>(count));
              for (int32_t& e : v) e = d(rng);
              return v;
            };
            const std::vector<int32_t> a = draw(ta, shapeNumel(shapeA)),
                                       b = draw(tb, shapeNumel(sbShape));
            const int32_t za = ta == kU8 ? 128 : -3, zb = tb == kU8 ? 101 : 5,
                          zc = tc == kU8 ? 77 : -20;
            // The small output scale saturates some sums; ties are common at these scales.
            const float sa = 0.05f, sb = 0.125f, sc = mul ? 0.75f : 0.0625f;
            auto m = kilnModel();
            addInput(m, "x", shapeA, ta);
            addQuantParams(m, "a", sa, ta, za);
            addIntInitializer(m, "B", tb, sbShape, b);
            addQuantParams(m, "b", sb, tb, zb);
            addQuantParams(m, "c", sc, tc, zc);
            addNode(m, mul ? "QLinearMul" : "QLinearAdd",
                    {"x", "a_scale", "a_zp", "B", "b_scale", "b_zp", "c_scale", "c_zp"}, {"y"},
                    "binary");
            lastNode(m)->set_domain("kiln");
            addOutput(m, "y", shapeA, tc);
            Tensor x(ta == kU8 ? DataType::kUint8 : DataType::kInt8, shapeA);
            for (int64_t i = 0; i < x.numel(); ++i) {
              if (ta == kU8)
                x.data<uint8_t>()[i] = static_cast<uint8_t>(a[i]);
              else
                x.data<int8_t>()[i] = static_cast<int8_t>(a[i]);
            }
            const Tensor y = runOne(m, "vec" + std::to_string(cases++), x);
            const auto [lowest, highest] = range(tc);
            for (int64_t i = 0; i < y.numel(); ++i) {
              // Index of B for output element i: [n, c, h, w] -> B's broadcast position.
              const int64_t w = i % 7, h = (i / 7) % 5, c = (i / 35) % 3, n = i / 105;
              const int64_t bi = sbShape.size() == 1 ? 0
                                 : sbShape[3] == 1   ? c
                                                     : ((n * 3 + c) * 5 + h) * 7 + w;
              const int32_t expected =
                  chainReference(mul, a[i], sa, za, b[bi], sb, zb, sc, zc, lowest, highest);
              const int32_t got = tc == kU8 ? y.data<uint8_t>()[i] : y.data<int8_t>()[i];
              ASSERT_EQ(got, expected)
                  << (mul ? "Mul" : "Add") << " case " << cases << " element " << i;
            }
          }
        }
      }
    }
  }
}

// A [2, 64, 19, 23] output (55936 elements: split over three threads, the slices cut mid-run)
// with B full-size and per channel, at 1 thread and at 3: every element as the chain gives it.
TEST(QLinearElementwiseKernel, ThreadedSlicesMatchTheChain) {
  std::mt19937 rng(23);
  const Shape shapeA{2, 64, 19, 23};
  const int64_t plane = 19 * 23;
  for (const Shape& sbShape : {shapeA, Shape{1, 64, 1, 1}}) {
    std::uniform_int_distribution<int> d(0, 255);
    std::vector<int32_t> a(static_cast<size_t>(shapeNumel(shapeA))),
        b(static_cast<size_t>(shapeNumel(sbShape)));
    for (int32_t& e : a) e = d(rng);
    for (int32_t& e : b) e = d(rng);
    auto m = kilnModel();
    addInput(m, "x", shapeA, kU8);
    addQuantParams(m, "a", 0.031f, kU8, 131);
    addIntInitializer(m, "B", kU8, sbShape, b);
    addQuantParams(m, "b", 0.047f, kU8, 120);
    addQuantParams(m, "c", 0.043f, kU8, 125);
    addNode(m, "QLinearAdd", {"x", "a_scale", "a_zp", "B", "b_scale", "b_zp", "c_scale", "c_zp"},
            {"y"}, "add");
    lastNode(m)->set_domain("kiln");
    addOutput(m, "y", shapeA, kU8);
    Tensor x(DataType::kUint8, shapeA);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<uint8_t>()[i] = static_cast<uint8_t>(a[i]);
    const std::string path = saveModel(
        m, tempDir("qlayer_threads" + std::to_string(sbShape.size() == 4 && sbShape[2] == 1)) /
               "model.onnx");
    for (int threads : {1, 3}) {
      SessionOptions options;
      options.threads = threads;
      Session session(path, options);
      const Tensor y = session.run({{"x", x}})[0].second;
      for (int64_t i = 0; i < y.numel(); ++i) {
        const int64_t bi = sbShape[2] == 1 ? (i / plane) % 64 : i;
        const int32_t expected =
            chainReference(false, a[i], 0.031f, 131, b[bi], 0.047f, 120, 0.043f, 125, 0, 255);
        ASSERT_EQ(y.data<uint8_t>()[i], expected) << threads << " threads, element " << i;
      }
    }
  }
}

TEST(QLinearElementwiseKernel, GlobalAveragePoolRoundsTiesToEven) {
  // Means 1.5 and 10.25 at y_scale 0.5: 3 and 20.5, which rounds to 20.
  auto m = kilnModel();
  addInput(m, "x", {1, 2, 2, 2}, kU8);
  addQuantParams(m, "x", 1.0f, kU8, 0);
  addQuantParams(m, "y", 0.5f, kU8, 0);
  addNode(m, "QLinearGlobalAveragePool", {"x", "x_scale", "x_zp", "y_scale", "y_zp"}, {"y"}, "gap");
  lastNode(m)->set_domain("kiln");
  addOutput(m, "y", {1, 2, 1, 1}, kU8);
  const Tensor y = runOne(m, "gap",
                          Tensor::fromVector(DataType::kUint8, {1, 2, 2, 2},
                                             std::vector<uint8_t>{0, 1, 2, 3, 10, 10, 10, 11}));
  EXPECT_EQ(y.shape(), (Shape{1, 2, 1, 1}));
  EXPECT_THAT(valuesOf<uint8_t>(y), ElementsAre(3, 20));
}

// Random planes of 63 elements (partial sums and a tail) and ResNet-50's 2048 planes of 7 x 7 (over
// the threads), u8 and s8: each mean as one double sum in order, rounded to float, then quantized.
TEST(QLinearElementwiseKernel, GlobalAveragePoolMatchesTheSumInOrder) {
  std::mt19937 rng(31);
  for (const Shape& shape : {Shape{2, 37, 7, 9}, Shape{1, 2048, 7, 7}}) {
    for (int type : {kU8, kS8}) {
      const int32_t lowest = type == kU8 ? 0 : -128, zx = type == kU8 ? 119 : -7, zy = 3;
      const float sx = 0.0371f, sy = 0.0123f;
      std::uniform_int_distribution<int> d(lowest, lowest + 255);
      Tensor x(type == kU8 ? DataType::kUint8 : DataType::kInt8, shape);
      std::vector<int32_t> values(static_cast<size_t>(x.numel()));
      for (size_t i = 0; i < values.size(); ++i) {
        values[i] = d(rng);
        if (type == kU8)
          x.data<uint8_t>()[i] = static_cast<uint8_t>(values[i]);
        else
          x.data<int8_t>()[i] = static_cast<int8_t>(values[i]);
      }
      auto m = kilnModel();
      addInput(m, "x", shape, type);
      addQuantParams(m, "x", sx, type, zx);
      addQuantParams(m, "y", sy, type, zy);
      addNode(m, "QLinearGlobalAveragePool", {"x", "x_scale", "x_zp", "y_scale", "y_zp"}, {"y"},
              "gap");
      lastNode(m)->set_domain("kiln");
      addOutput(m, "y", {shape[0], shape[1], 1, 1}, type);
      const Tensor y = runOne(m, "gap_sum" + std::to_string(shape[1]) + std::to_string(type), x);
      const int64_t size = shape[2] * shape[3];
      for (int64_t p = 0; p < shape[0] * shape[1]; ++p) {
        double sum = 0;
        for (int64_t i = 0; i < size; ++i)
          sum += static_cast<float>((values[static_cast<size_t>(p * size + i)] - zx) *
                                    static_cast<double>(sx));
        const float mean = static_cast<float>(sum / static_cast<double>(size));
        const float scaled = static_cast<float>(static_cast<double>(mean) / sy);
        const int32_t expected =
            static_cast<int32_t>(std::clamp(std::nearbyint(static_cast<double>(scaled)) + zy,
                                            double(lowest), double(lowest + 255)));
        const int32_t got = type == kU8 ? y.data<uint8_t>()[p] : y.data<int8_t>()[p];
        ASSERT_EQ(got, expected) << "plane " << p << " of " << shape[1];
      }
    }
  }
}

}  // namespace
}  // namespace kiln
