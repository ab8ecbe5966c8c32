// Outputs computed in place of an input that dies at their node (MemoryPlan::inPlaceOutputs):
// which ones the planner picks, and that the kernels then still compute the right values.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/executor.h"
#include "engine/memory_plan.h"
#include "graph_loading.h"
#include "model_builder.h"
#include "opt/passes.h"
#include "random_data.h"

namespace kiln {
namespace {

using namespace kiln::testing;

int id(const ir::Graph& g, const std::string& name) { return g.findValue(name); }

Tensor floats(Shape shape, const std::vector<float>& v) {
  return Tensor::fromVector<float>(DataType::kFloat32, shape, v);
}

// x -> Softmax a -> Relu b -> Sigmoid c -> Softmax y: b and c are computed in a's slot.
TEST(InPlaceOutputs, AnElementwiseChainRunsInOneSlot) {
  auto m = makeModel();
  addInput(m, "x", {2, 64});
  addNode(m, "Softmax", {"x"}, {"a"});
  addNode(m, "Relu", {"a"}, {"b"});
  addNode(m, "Sigmoid", {"b"}, {"c"});
  addNode(m, "Softmax", {"c"}, {"y"});
  addOutput(m, "y", {2, 64});
  auto g = std::make_shared<ir::Graph>(loadInferredGraph(m, "in_place_chain"));
  const MemoryPlan plan = planMemoryForInputShapes(*g, {{id(*g, "x"), {2, 64}}});
  const int a = id(*g, "a"), b = id(*g, "b"), c = id(*g, "c");
  EXPECT_EQ(plan.inPlaceOutputs, 2);
  EXPECT_EQ(plan.storageOf[b], a);
  EXPECT_EQ(plan.storageOf[c], a);
  EXPECT_EQ(plan.offsets[b], plan.offsets[a]);
  EXPECT_EQ(plan.offsets[c], plan.offsets[a]);
  EXPECT_EQ(plan.arenaBytes, 512u);
  EXPECT_EQ(plan.intermediateBytes, 3u * 512);

  // softmax(sigmoid(relu(softmax(x)))), row by row; twice on the same arena.
  const std::vector<float> x = randomFloats(128, 3);
  std::vector<float> want(128);
  for (int r = 0; r < 2; ++r) {
    double sum = 0;
    for (int i = 0; i < 64; ++i) sum += std::exp(double(x[r * 64 + i]));
    std::vector<double> s(64);
    double sum2 = 0;
    for (int i = 0; i < 64; ++i) {
      const double sm = std::exp(double(x[r * 64 + i])) / sum;
      s[i] = std::exp(1.0 / (1.0 + std::exp(-std::max(sm, 0.0))));
      sum2 += s[i];
    }
    for (int i = 0; i < 64; ++i) want[r * 64 + i] = static_cast<float>(s[i] / sum2);
  }
  Executor executor(g);
  ExecutorMemory memory;
  for (int run = 0; run < 2; ++run) {
    const Tensor y = executor.run({{id(*g, "x"), floats({2, 64}, x)}}, &memory)[0];
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(y.data<float>()[i], want[i], 1e-6f) << "run " << run << " element " << i;
  }
}

// Where the output may not take over its input's slot.
TEST(InPlaceOutputs, OnlyOverAnInputThatDiesThere) {
  auto m = makeModel();
  addInput(m, "x", {1, 256});
  addFloatInitializer(m, "row", {256}, std::vector<float>(256, 0.5f));
  addFloatInitializer(m, "one", {1, 1}, {1.0f});
  addInt64Initializer(m, "flat", {1, 256});
  addNode(m, "Relu", {"x"}, {"a"});      // x is a graph input
  addNode(m, "Sigmoid", {"a"}, {"b"});   // a is read again below
  addNode(m, "Add", {"a", "b"}, {"c"});  // both die here: c takes a's slot (the first input)
  addNode(m, "Mul", {"c", "c"}, {"d"});  // one tensor read twice
  addNode(m, "Softmax", {"d"}, {"e"});
  addNode(m, "Reshape", {"e", "flat"}, {"r"});
  addNode(m, "Add", {"one", "r"}, {"f"});  // in place of r's storage, e: r is a view of it
  addNode(m, "Mul", {"f", "row"}, {"y"});  // y is a graph output
  addOutput(m, "y", {1, 256});
  auto g = loadInferredGraph(m, "in_place_refusals");
  const MemoryPlan plan = planMemoryForInputShapes(g, {{id(g, "x"), {1, 256}}});
  EXPECT_EQ(plan.storageOf[id(g, "a")], id(g, "a"));
  EXPECT_EQ(plan.storageOf[id(g, "b")], id(g, "b"));
  EXPECT_EQ(plan.storageOf[id(g, "c")], id(g, "a"));
  EXPECT_EQ(plan.storageOf[id(g, "d")], id(g, "d"));
  EXPECT_EQ(plan.storageOf[id(g, "f")], id(g, "e"));
  EXPECT_EQ(plan.offsets[id(g, "f")], plan.offsets[id(g, "e")]);
  EXPECT_FALSE(plan.placed(id(g, "y")));
  EXPECT_EQ(plan.inPlaceOutputs, 2);
}

// A residual block as PyTorch exports it, convolutions with enough input channels to run in
// slabs: t = relu(conv1(x)), u = relu(conv2(t)), y = relu(conv3(u) + t). In the blocked layout,
// conv3 writes its output over t, its residual, which dies there. 1x1 convolutions: each is a
// matrix product over the channels, computed here in double.
TEST(InPlaceOutputs, AConvolutionOverwritesTheResidualThatDiesThere) {
  constexpr int64_t kC = 256, kPixels = 6 * 5;
  auto m = makeModel(13);
  addInput(m, "x", {1, kC, 6, 5});
  std::vector<std::vector<float>> w, b;
  for (int i = 0; i < 3; ++i) {
    w.push_back(randomFloats(kC * kC, 10 + i));
    for (float& v : w.back()) v *= 0.1f;
    b.push_back(randomFloats(kC, 20 + i));
    const std::string n = std::to_string(i + 1);
    addFloatInitializer(m, "w" + n, {kC, kC, 1, 1}, w.back());
    addFloatInitializer(m, "b" + n, {kC}, b.back());
  }
  addNode(m, "Conv", {"x", "w1", "b1"}, {"c1"});
  addNode(m, "Relu", {"c1"}, {"t"});
  addNode(m, "Conv", {"t", "w2", "b2"}, {"c2"});
  addNode(m, "Relu", {"c2"}, {"u"});
  addNode(m, "Conv", {"u", "w3", "b3"}, {"c3"});
  addNode(m, "Add", {"c3", "t"}, {"s"});
  addNode(m, "Relu", {"s"}, {"y"});
  addOutput(m, "y", {1, kC, 6, 5});
  auto g = std::make_shared<ir::Graph>(loadInferredGraph(m, "in_place_conv"));
  opt::fuseLayers(*g);
  const MemoryPlan plan = planMemoryForInputShapes(*g, {{id(*g, "x"), {1, kC, 6, 5}}});
  int residualConvs = 0;
  for (const ir::Node& node : g->nodes) {
    if (node.opType != "NchwcConv" || node.inputs.size() < 4) continue;
    ++residualConvs;
    EXPECT_EQ(plan.storageOf[static_cast<size_t>(node.outputs[0])],
              plan.storageOf[static_cast<size_t>(node.inputs[3])]);
  }
  ASSERT_EQ(residualConvs, 1);

  const std::vector<float> x = randomFloats(kC * kPixels, 30);
  const auto conv = [&](int layer, const std::vector<double>& in) {
    std::vector<double> out(kC * kPixels);
    for (int64_t co = 0; co < kC; ++co) {
      for (int64_t p = 0; p < kPixels; ++p) {
        double sum = b[layer][co];
        for (int64_t ci = 0; ci < kC; ++ci)
          sum += double(w[layer][co * kC + ci]) * in[ci * kPixels + p];
        out[co * kPixels + p] = sum;
      }
    }
    return out;
  };
  const auto relu = [](std::vector<double> v) {
    for (double& e : v) e = std::max(e, 0.0);
    return v;
  };
  const std::vector<double> t = relu(conv(0, std::vector<double>(x.begin(), x.end())));
  std::vector<double> want = conv(2, relu(conv(1, t)));
  for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(want[i] + t[i], 0.0);
  Executor executor(g);
  ExecutorMemory memory;
  for (int run = 0; run < 2; ++run) {
    const Tensor y = executor.run({{id(*g, "x"), floats({1, kC, 6, 5}, x)}}, &memory)[0];
    ASSERT_EQ(y.numel(), static_cast<int64_t>(want.size()));
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(y.data<float>()[i], want[i], 1e-4 * (1.0 + std::fabs(want[i])))
          << "run " << run << " element " << i;
    }
  }
}

}  // namespace
}  // namespace kiln
