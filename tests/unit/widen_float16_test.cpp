// opt::widenFloat16Interior: float16 graphs before the pass and what they must be after it (which
// nodes remain, each value's type), then both run on the same inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "core/half.h"
#include "graph_loading.h"
#include "graph_runner.h"
#include "opt/passes.h"
#include "random_data.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using Strings = std::vector<std::string>;
constexpr int kF16 = onnx::TensorProto::FLOAT16;
constexpr int kF32 = onnx::TensorProto::FLOAT;

void addHalfInitializer(onnx::ModelProto& m, const std::string& name, const Shape& dims,
                        unsigned seed) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(kF16);
  for (int64_t d : dims) t->add_dims(d);
  std::string bytes;
  for (float v : randomFloats(shapeNumel(dims), seed)) {
    const uint16_t h = floatToHalfBits(v);
    bytes.append(reinterpret_cast<const char*>(&h), sizeof h);
  }
  t->set_raw_data(bytes);
}

void addCast(onnx::ModelProto& m, const std::string& in, const std::string& out, int to) {
  addNode(m, "Cast", {in}, {out}, "cast_" + out);
  setInt(lastNode(m), "to", to);
}

Tensor randomTensor(DataType type, const Shape& shape, unsigned seed, float lo = -1.0f,
                    float hi = 1.0f) {
  Tensor t(type, shape);
  const std::vector<float> v = randomFloats(t.numel(), seed, lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (type == DataType::kFloat16)
      t.data<uint16_t>()[i] = floatToHalfBits(v[static_cast<size_t>(i)]);
    else
      t.data<float>()[i] = v[static_cast<size_t>(i)];
  }
  return t;
}

Tensor asFloat32(const Tensor& t) {
  if (t.dtype() == DataType::kFloat32) return t;
  Tensor f(DataType::kFloat32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i)
    f.data<float>()[i] = halfBitsToFloat(t.data<uint16_t>()[i]);
  return f;
}

// The graph's op types, sorted (the order of independent nodes is the sort's business).
Strings opTypes(const ir::Graph& g) {
  Strings ops;
  for (const ir::Node& n : g.nodes) ops.push_back(n.opType);
  std::sort(ops.begin(), ops.end());
  return ops;
}

DataType typeOf(const ir::Graph& g, const std::string& value) {
  return g.value(g.findValue(value)).type.dtype;
}

// The node that writes `value`.
const ir::Node& producerOf(const ir::Graph& g, const std::string& value) {
  return g.nodes.at(static_cast<size_t>(g.value(g.findValue(value)).producer));
}

// Every node that is not a Cast reads and writes no float16 tensor.
void expectNoFloat16Compute(const ir::Graph& g) {
  for (const ir::Node& n : g.nodes) {
    if (n.opType == "Cast") continue;
    for (int id : n.inputs)
      EXPECT_NE(g.value(id).type.dtype, DataType::kFloat16) << n.label() << " reads float16";
    for (int id : n.outputs)
      EXPECT_NE(g.value(id).type.dtype, DataType::kFloat16) << n.label() << " writes float16";
  }
}

// A keep_io_types conversion: float32 I/O, Cast pairs around a float16 Conv + Relu.
onnx::ModelProto keepIoTypesModel() {
  auto m = makeModel(13);
  addInput(m, "x", {1, 3, 6, 6});
  addHalfInitializer(m, "W", {4, 3, 3, 3}, 1);
  addHalfInitializer(m, "B", {4}, 2);
  addCast(m, "x", "x16", kF16);
  addNode(m, "Conv", {"x16", "W", "B"}, {"c"}, "conv");
  addNode(m, "Relu", {"c"}, {"r"}, "relu");
  addCast(m, "r", "y", kF32);
  addOutput(m, "y", {1, 4, 4, 4});
  return m;
}

TEST(WidenFloat16, KeepIoTypesModelLosesBothCasts) {
  const ir::Graph before = loadInferredGraph(keepIoTypesModel(), "widen_keep_io");
  ir::Graph after = before;
  EXPECT_EQ(opt::widenFloat16Interior(after), 2);
  ir::verifyGraph(after);
  EXPECT_EQ(opTypes(after), (Strings{"Conv", "Relu"}));
  expectNoFloat16Compute(after);
  EXPECT_EQ(typeOf(after, "W"), DataType::kFloat32);
  EXPECT_EQ(typeOf(after, "x"), DataType::kFloat32);
  EXPECT_EQ(typeOf(after, "y"), DataType::kFloat32);
  EXPECT_EQ(producerOf(after, "y").opType, "Relu");  // writes the graph output itself
  const Tensor x = randomTensor(DataType::kFloat32, {1, 3, 6, 6}, 7);
  // The float16 run rounds x, the products' sums and the output: one float16 ulp of a sum of 27.
  expectClose(runGraph(after, {x})[0], runGraph(before, {x})[0], 4e-3f);
}

TEST(WidenFloat16, Float16InputsAndOutputsKeepTheirTypeThroughBoundaryCasts) {
  auto m = makeModel(13);
  addInput(m, "x", {2, 8}, kF16);
  addHalfInitializer(m, "s", {8}, 3);
  addNode(m, "Mul", {"x", "s"}, {"p"}, "mul");
  addNode(m, "Sigmoid", {"p"}, {"y"}, "sigmoid");
  addOutput(m, "y", {2, 8}, kF16);
  const ir::Graph before = loadInferredGraph(m, "widen_f16_io");
  ir::Graph after = before;
  EXPECT_EQ(opt::widenFloat16Interior(after), 0);
  ir::verifyGraph(after);
  EXPECT_EQ(opTypes(after), (Strings{"Cast", "Cast", "Mul", "Sigmoid"}));
  EXPECT_EQ(typeOf(after, "x"), DataType::kFloat16);
  EXPECT_EQ(typeOf(after, "y"), DataType::kFloat16);
  EXPECT_EQ(typeOf(after, "p"), DataType::kFloat32);
  EXPECT_EQ(typeOf(after, "s"), DataType::kFloat32);
  expectNoFloat16Compute(after);
  const Tensor x = randomTensor(DataType::kFloat16, {2, 8}, 8, -4.0f, 4.0f);
  const Tensor got = runGraph(after, {x})[0];
  ASSERT_EQ(got.dtype(), DataType::kFloat16);
  expectClose(asFloat32(got), asFloat32(runGraph(before, {x})[0]), 1e-3f);
}

// Cast to an integer type truncates the float16 value: it must see the product rounded to
// float16, not the float32 one (2.9997 -> 3.0 in float16 -> 3, not 2).
TEST(WidenFloat16, CastToIntegerReadsTheFloat16RoundedValue) {
  auto m = makeModel(13);
  addInput(m, "x", {64}, kF16);
  addHalfInitializer(m, "s", {64}, 4);  // in [-1, 1]: products up to 1000, float16 steps of 0.5
  addNode(m, "Mul", {"x", "s"}, {"p"}, "mul");
  addNode(m, "Relu", {"p"}, {"r"}, "relu");
  addCast(m, "r", "n", onnx::TensorProto::INT64);
  addNode(m, "Less", {"p", "s"}, {"lt"}, "less");
  addOutput(m, "n", {64}, onnx::TensorProto::INT64);
  addOutput(m, "lt", {64}, onnx::TensorProto::BOOL);
  const ir::Graph before = loadInferredGraph(m, "widen_cast_int");
  ir::Graph after = before;
  opt::widenFloat16Interior(after);
  ir::verifyGraph(after);
  EXPECT_EQ(typeOf(after, "p"), DataType::kFloat32);
  EXPECT_EQ(typeOf(after, "r"), DataType::kFloat32);
  const ir::Node& toInt = producerOf(after, "n");
  EXPECT_EQ(typeOf(after, after.value(toInt.inputs[0]).name), DataType::kFloat16);
  EXPECT_EQ(producerOf(after, after.value(toInt.inputs[0]).name).opType, "Cast");
  // Less reads float16 forms of p and of the constant s, whose float32 copy Mul reads.
  const ir::Node& less = producerOf(after, "lt");
  EXPECT_EQ(after.value(less.inputs[0]).type.dtype, DataType::kFloat16);
  EXPECT_EQ(after.value(less.inputs[1]).type.dtype, DataType::kFloat16);
  EXPECT_EQ(after.value(producerOf(after, "p").inputs[1]).type.dtype, DataType::kFloat32);
  const Tensor x = randomTensor(DataType::kFloat16, {64}, 9, 0.0f, 1000.0f);
  const std::vector<Tensor> want = runGraph(before, {x}), got = runGraph(after, {x});
  // The test can fail: truncating the float32 products gives other integers.
  const Tensor sv = *before.value(before.findValue("s")).constant;
  int differ = 0;
  for (int64_t i = 0; i < 64; ++i) {
    const float p32 =
        halfBitsToFloat(x.data<uint16_t>()[i]) * halfBitsToFloat(sv.data<uint16_t>()[i]);
    differ += static_cast<int64_t>(std::max(p32, 0.0f)) != want[0].data<int64_t>()[i];
  }
  EXPECT_GT(differ, 0);
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_EQ(got[k].dtype(), want[k].dtype());
    ASSERT_EQ(got[k].byteSize(), want[k].byteSize());
    EXPECT_EQ(std::memcmp(got[k].raw(), want[k].raw(), got[k].byteSize()), 0) << "output " << k;
  }
}

TEST(WidenFloat16, GraphOutputReadInsideIsCastOnceAndReadWide) {
  auto m = makeModel(13);
  addInput(m, "x", {4}, kF16);
  addNode(m, "Relu", {"x"}, {"r"}, "relu");
  addNode(m, "Add", {"r", "r"}, {"s"}, "add");
  addOutput(m, "r", {4}, kF16);
  addOutput(m, "s", {4}, kF16);
  ir::Graph g = loadInferredGraph(m, "widen_output_read");
  opt::widenFloat16Interior(g);
  ir::verifyGraph(g);
  EXPECT_EQ(opTypes(g), (Strings{"Add", "Cast", "Cast", "Cast", "Relu"}));
  EXPECT_EQ(typeOf(g, "r"), DataType::kFloat16);
  EXPECT_EQ(producerOf(g, "r").opType, "Cast");
  const ir::Node& add = producerOf(g, g.value(producerOf(g, "s").inputs[0]).name);
  EXPECT_EQ(add.opType, "Add");
  EXPECT_EQ(add.inputs[0], producerOf(g, "r").inputs[0]);  // the float32 Relu output
  expectNoFloat16Compute(g);
}

TEST(WidenFloat16, Float32ModelIsUntouched) {
  auto m = makeModel(13);
  addInput(m, "x", {4});
  addNode(m, "Relu", {"x"}, {"y"}, "relu");
  addOutput(m, "y", {4});
  ir::Graph g = loadInferredGraph(m, "widen_f32");
  EXPECT_EQ(opt::widenFloat16Interior(g), 0);
  EXPECT_EQ(opTypes(g), (Strings{"Relu"}));
}

}  // namespace
}  // namespace kiln
