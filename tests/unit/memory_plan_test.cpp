// The memory planner (tensors placed in one arena by lifetime) and the executor running on it.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/executor.h"
#include "engine/memory_plan.h"
#include "graph_loading.h"
#include "model_builder.h"
#include "onnx/loader.h"

namespace kiln {
namespace {

using namespace kiln::testing;

std::shared_ptr<const ir::Graph> loadGraph(const onnx::ModelProto& m, const std::string& name) {
  return std::make_shared<ir::Graph>(loadInferredGraph(m, name));
}

int id(const ir::Graph& g, const std::string& name) { return g.findValue(name); }

bool overlap(const MemoryPlan& plan, int a, int b) {
  uint64_t a0 = static_cast<uint64_t>(plan.offsets[static_cast<size_t>(a)]),
           a1 = a0 + plan.bytes[static_cast<size_t>(a)];
  uint64_t b0 = static_cast<uint64_t>(plan.offsets[static_cast<size_t>(b)]),
           b1 = b0 + plan.bytes[static_cast<size_t>(b)];
  return a0 < b1 && b0 < a1;
}

Tensor floats(Shape shape, const std::vector<float>& v) {
  return Tensor::fromVector<float>(DataType::kFloat32, shape, v);
}

std::vector<float> ramp(int64_t n, float scale, float shift) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>(i) + shift;
  return v;
}

// x[1,256] -> Relu a -> Softmax b -> Softmax c -> Relu y: a and c never live at once, so they
// share (Softmax is not computed in place of its input).
TEST(MemoryPlan, ReusesTheSlotOfATensorPastItsLastUse) {
  auto m = makeModel();
  addInput(m, "x", {1, 256});
  addNode(m, "Relu", {"x"}, {"a"});
  addNode(m, "Softmax", {"a"}, {"b"});
  addNode(m, "Softmax", {"b"}, {"c"});
  addNode(m, "Relu", {"c"}, {"y"});
  addOutput(m, "y", {1, 256});
  auto g = loadGraph(m, "plan_chain");
  MemoryPlan plan = planMemoryForInputShapes(*g, {{id(*g, "x"), {1, 256}}});
  EXPECT_EQ(plan.placedTensors, 3);
  EXPECT_FALSE(plan.placed(id(*g, "x")));  // graph input
  EXPECT_FALSE(plan.placed(id(*g, "y")));  // graph output
  EXPECT_EQ(plan.bytes[id(*g, "a")], 1024u);
  EXPECT_EQ(plan.offsets[id(*g, "a")], 0);
  EXPECT_EQ(plan.offsets[id(*g, "b")], 1024);
  EXPECT_EQ(plan.offsets[id(*g, "c")],
            0);  // a's slot: a was last read by step 1, c is made at step 2
  EXPECT_EQ(plan.arenaBytes, 2048u);
  EXPECT_EQ(plan.intermediateBytes, 3072u);
}

// A stays alive through its views R and R2 (Reshape shares storage) until step 6, while the
// larger C, D and S come and go: none of them may be placed over A.
//   A = Relu(x); R = Reshape(A, 16x16); C = Concat(x, x); D = Tanh(C); S = D[:, :256];
//   R2 = Reshape(R, 1x256); y = R2 + S  ==  relu(x) + tanh(x)
onnx::ModelProto aliasModel(int64_t batch) {
  auto m = makeModel();
  addInput(m, "x", {batch, 256});
  addInt64Initializer(m, "square", {-1, 16, 16});
  addInt64Initializer(m, "flat", {-1, 256});
  addInt64Initializer(m, "zero", {0});
  addInt64Initializer(m, "width", {256});
  addInt64Initializer(m, "axis1", {1});
  addNode(m, "Relu", {"x"}, {"A"});
  addNode(m, "Reshape", {"A", "square"}, {"R"});
  addNode(m, "Concat", {"x", "x"}, {"C"});
  setInt(lastNode(m), "axis", 1);
  addNode(m, "Tanh", {"C"}, {"D"});
  addNode(m, "Slice", {"D", "zero", "width", "axis1"}, {"S"});
  addNode(m, "Reshape", {"R", "flat"}, {"R2"});
  addNode(m, "Add", {"R2", "S"}, {"y"});
  addOutput(m, "y", {batch, 256});
  return m;
}

std::vector<float> reluPlusTanh(const std::vector<float>& x) {
  std::vector<float> y;
  for (float v : x) y.push_back(std::max(v, 0.0f) + std::tanh(v));
  return y;
}

void expectNear(const Tensor& t, const std::vector<float>& want) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(t.data<float>()[i], want[i], 1e-6f) << "element " << i;
}

TEST(MemoryPlan, AViewKeepsItsSourceSlotAliveUntilItsOwnLastUse) {
  auto g = loadGraph(aliasModel(1), "plan_alias");
  MemoryPlan plan = planMemoryForInputShapes(*g, {{id(*g, "x"), {1, 256}}});
  const int a = id(*g, "A");
  EXPECT_EQ(plan.storageOf[id(*g, "R")], a);
  EXPECT_EQ(plan.storageOf[id(*g, "R2")], a);
  EXPECT_FALSE(plan.placed(id(*g, "R")));  // views take no room of their own
  ASSERT_TRUE(plan.placed(a));
  for (const char* other : {"C", "D", "S"}) {
    ASSERT_TRUE(plan.placed(id(*g, other))) << other;
    EXPECT_FALSE(overlap(plan, a, id(*g, other))) << "A overlaps " << other;
  }
  // C dies at Tanh: D is computed in its slot, which then lives on to S's making.
  const int c = id(*g, "C"), d = id(*g, "D");
  EXPECT_EQ(plan.inPlaceOutputs, 1);
  EXPECT_EQ(plan.storageOf[d], c);
  EXPECT_EQ(plan.offsets[d], plan.offsets[c]);
  EXPECT_FALSE(overlap(plan, c, id(*g, "S")));
  EXPECT_EQ(plan.intermediateBytes, 1024u + 2048 + 2048 + 1024);
  EXPECT_EQ(plan.arenaBytes, 1024u + 2048 + 1024);
}

// Runs on one arena again and again: the slots hold the previous run's values, so a kernel that
// read a slot before writing it, or a slot reused too early, shows up as a wrong result.
TEST(MemoryPlan, ExecutorRunsOnTheArenaAndPlansOncePerInputShape) {
  auto m = aliasModel(-1);
  auto g = loadGraph(m, "plan_run");
  Executor executor(g);
  ExecutorMemory memory;
  const int x = id(*g, "x");
  for (int64_t batch : {1, 1, 3, 3, 1}) {
    std::vector<float> input = ramp(batch * 256, 0.01f * static_cast<float>(batch), -1.5f);
    std::vector<Tensor> out = executor.run({{x, floats({batch, 256}, input)}}, &memory);
    ASSERT_EQ(out.size(), 1u);
    expectNear(out[0], reluPlusTanh(input));
    EXPECT_GE(memory.arenaCapacity(), memory.plan().arenaBytes);
    EXPECT_EQ(memory.plan().arenaBytes, static_cast<uint64_t>(batch) * (1024 + 2048 + 1024));
  }
  EXPECT_EQ(memory.planCount(), 3);  // 1, 3, then 1 again
  // The same results without a plan (every tensor on the heap).
  std::vector<float> input = ramp(256, 0.02f, -2.0f);
  expectNear(executor.run({{x, floats({1, 256}, input)}})[0], reluPlusTanh(input));
}

// NonZero's output size depends on the data: it is not planned and is allocated at run time,
// while the tensors around it still use the arena.
TEST(MemoryPlan, DataDependentShapesStayOnTheHeap) {
  auto m = makeModel();
  addInput(m, "x", {6});
  addNode(m, "Relu", {"x"}, {"r"});
  addNode(m, "NonZero", {"r"}, {"nz"});
  addNode(m, "Cast", {"nz"}, {"f"});
  setInt(lastNode(m), "to", onnx::TensorProto::FLOAT);
  addNode(m, "Neg", {"f"}, {"y"});
  addOutput(m, "y", {1, -1});
  auto g = loadGraph(m, "plan_nonzero");
  Executor executor(g);
  ExecutorMemory memory;
  std::vector<Tensor> out =
      executor.run({{id(*g, "x"), floats({6}, {0, 3, -1, 5, 0, 2})}}, &memory);
  EXPECT_TRUE(memory.plan().placed(id(*g, "r")));
  EXPECT_FALSE(memory.plan().placed(id(*g, "nz")));
  EXPECT_FALSE(memory.plan().placed(id(*g, "f")));
  ASSERT_EQ(out[0].shape(), (Shape{1, 3}));
  EXPECT_EQ(std::vector<float>(out[0].data<float>(), out[0].data<float>() + 3),
            (std::vector<float>{-1, -3, -5}));
}

// A graph output computed straight into a caller's buffer, through the view that produces it.
TEST(MemoryPlan, OutputBuffersReceiveTheTensorTheOutputIsAViewOf) {
  auto m = makeModel();
  addInput(m, "x", {2, 3});
  addNode(m, "Relu", {"x"}, {"r"});
  addNode(m, "Flatten", {"r"}, {"y"});
  setInt(lastNode(m), "axis", 0);
  addOutput(m, "y", {1, 6});
  auto g = loadGraph(m, "plan_view_out");
  Executor executor(g);
  ExecutorMemory memory;
  std::vector<float> buffer(6, 42.0f);
  std::vector<Tensor> out =
      executor.run({{id(*g, "x"), floats({2, 3}, {-1, 2, -3, 4, -5, 6})}}, &memory,
                   {{id(*g, "y"), buffer.data(), buffer.size() * sizeof(float)}});
  EXPECT_EQ(out[0].raw(), buffer.data());
  EXPECT_EQ(buffer, (std::vector<float>{0, 2, 0, 4, 0, 6}));
  // A buffer too small for the output is left alone: the output is computed elsewhere.
  std::vector<float> small(2, 42.0f);
  out = executor.run({{id(*g, "x"), floats({2, 3}, {1, 2, 3, 4, 5, 6})}}, &memory,
                     {{id(*g, "y"), small.data(), small.size() * sizeof(float)}});
  EXPECT_NE(out[0].raw(), small.data());
  EXPECT_EQ(small, (std::vector<float>{42, 42}));
}

// Weights a kernel keeps packed are freed from the graph (not held twice) unless another node
// reads them: here W feeds MatMul (packs it) and V feeds MatMul and Add (reads it as is).
TEST(MemoryPlan, PackedWeightsAreFreedUnlessAnotherNodeReadsThem) {
  auto m = makeModel();
  addInput(m, "x", {2, 2});
  addFloatInitializer(m, "w", {2, 2}, {1, 2, 3, 4});
  addFloatInitializer(m, "v", {2, 2}, {1, 0, 0, 1});
  addNode(m, "MatMul", {"x", "w"}, {"a"});
  addNode(m, "MatMul", {"a", "v"}, {"b"});
  addNode(m, "Add", {"b", "v"}, {"y"});
  addOutput(m, "y", {2, 2});
  ir::Model model = onnx_import::loadModel(saveModel(m, tempDir("packed_release") / "m.onnx"));
  ir::inferShapes(model.graph);
  auto g = std::make_shared<ir::Graph>(std::move(model.graph));
  Executor executor(g, Executor::kFreeCopiedWeights);
  EXPECT_EQ(executor.constantsWithOwnCopies(), (std::vector<int>{id(*g, "w")}));
  const Tensor& w = *g->value(id(*g, "w")).constant;
  EXPECT_EQ(w.raw(), nullptr);
  EXPECT_EQ(w.shape(), (Shape{2, 2}));
  EXPECT_NE(g->value(id(*g, "v")).constant->raw(), nullptr);
  ExecutorMemory memory;
  std::vector<Tensor> out = executor.run({{id(*g, "x"), floats({2, 2}, {1, 1, 0, 2})}}, &memory);
  // x @ w = [[4, 6], [6, 8]]; @ I + I = [[5, 6], [6, 9]]
  EXPECT_EQ(std::vector<float>(out[0].data<float>(), out[0].data<float>() + 4),
            (std::vector<float>{5, 6, 6, 9}));
}

}  // namespace
}  // namespace kiln
