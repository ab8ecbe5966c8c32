// Control flow: If/Loop subgraphs that read outer-scope values (implicit inputs), loop-carried
// values whose shape changes between iterations, and the error for a name no scope defines.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/plan_format.h"
#include "engine_test_support.h"
#include "ir/node_attrs.h"
#include "kiln/error.h"
#include "kiln/onnx_parser.h"
#include "kiln/session.h"
#include "model_builder.h"
#include "onnx/loader.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace kiln::testing;

onnx::NodeProto* addGraphNode(onnx::GraphProto* g, const std::string& op,
                              const std::vector<std::string>& inputs,
                              const std::vector<std::string>& outputs) {
  auto* node = g->add_node();
  node->set_op_type(op);
  node->set_name(op + "_" + std::to_string(g->node_size()));
  for (const auto& i : inputs) node->add_input(i);
  for (const auto& o : outputs) node->add_output(o);
  return node;
}

void addIntAttr(onnx::NodeProto* node, const std::string& name, int64_t value) {
  auto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

onnx::GraphProto* addGraphAttr(onnx::NodeProto* node, const std::string& name) {
  auto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(name);
  return a->mutable_g();
}

// y = cond ? x + x : -x, where both branches read the outer x.
onnx::ModelProto ifModel(const std::string& elseReads) {
  auto m = makeModel(13);
  addInput(m, "cond", {}, onnx::TensorProto::BOOL);
  addInput(m, "x", {3});
  auto* ifNode = m.mutable_graph()->add_node();
  ifNode->set_op_type("If");
  ifNode->set_name("if");
  ifNode->add_input("cond");
  ifNode->add_output("y");
  auto* thenBranch = addGraphAttr(ifNode, "then_branch");
  addGraphNode(thenBranch, "Add", {"x", "x"}, {"sum"});
  setValueInfo(thenBranch->add_output(), "sum", onnx::TensorProto::FLOAT, {3});
  auto* elseBranch = addGraphAttr(ifNode, "else_branch");
  addGraphNode(elseBranch, "Neg", {elseReads}, {"neg"});
  setValueInfo(elseBranch->add_output(), "neg", onnx::TensorProto::FLOAT, {3});
  addOutput(m, "y", {3});
  return m;
}

std::vector<float> floats(const Tensor& t) {
  return {t.data<float>(), t.data<float>() + t.numel()};
}

TEST(ControlFlow, IfBranchesReadAnOuterValue) {
  auto dir = tempDir("if_outer");
  Session s(saveModel(ifModel("x"), dir / "m.onnx"));
  Tensor x = Tensor::fromVector<float>(DataType::kFloat32, {3}, {1, 2, 3});
  auto yes = s.run({{"cond", Tensor::fromVector<uint8_t>(DataType::kBool, {}, {1})}, {"x", x}});
  EXPECT_THAT(floats(yes.at(0).second), ElementsAre(2, 4, 6));
  auto no = s.run({{"cond", Tensor::fromVector<uint8_t>(DataType::kBool, {}, {0})}, {"x", x}});
  EXPECT_THAT(floats(no.at(0).second), ElementsAre(-1, -2, -3));
}

// Three iterations: v = Concat(v, x) grows by x's length each time; the scan output stacks the
// iteration number (as float) of every iteration.
TEST(ControlFlow, LoopCarriedValueGrowsAndScanOutputStacks) {
  auto m = makeModel(13);
  addInput(m, "M", {}, onnx::TensorProto::INT64);
  addInput(m, "v0", {1});
  addInput(m, "x", {2});
  auto* loop = m.mutable_graph()->add_node();
  loop->set_op_type("Loop");
  loop->set_name("loop");
  for (const char* in : {"M", "", "v0"}) loop->add_input(in);
  loop->add_output("v_final");
  loop->add_output("iters");
  auto* body = addGraphAttr(loop, "body");
  setValueInfo(body->add_input(), "i", onnx::TensorProto::INT64, {});
  setValueInfo(body->add_input(), "cond_in", onnx::TensorProto::BOOL, {});
  auto* vIn = body->add_input();
  vIn->set_name("v");
  vIn->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  addGraphNode(body, "Identity", {"cond_in"}, {"cond_out"});
  addIntAttr(addGraphNode(body, "Concat", {"v", "x"}, {"v_next"}), "axis", 0);
  addIntAttr(addGraphNode(body, "Cast", {"i"}, {"i_float"}), "to", onnx::TensorProto::FLOAT);
  setValueInfo(body->add_output(), "cond_out", onnx::TensorProto::BOOL, {});
  auto* vOut = body->add_output();
  vOut->set_name("v_next");
  vOut->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  setValueInfo(body->add_output(), "i_float", onnx::TensorProto::FLOAT, {});
  addOutput(m, "v_final", {-1});
  addOutput(m, "iters", {-1});

  auto dir = tempDir("loop_grow");
  Session s(saveModel(m, dir / "m.onnx"));
  auto out = s.run({{"M", Tensor::fromVector<int64_t>(DataType::kInt64, {}, {3})},
                    {"v0", Tensor::fromVector<float>(DataType::kFloat32, {1}, {1})},
                    {"x", Tensor::fromVector<float>(DataType::kFloat32, {2}, {7, 8})}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].second.shape(), (Shape{7}));
  EXPECT_THAT(floats(out[0].second), ElementsAre(1, 7, 8, 7, 8, 7, 8));
  EXPECT_EQ(out[1].second.shape(), (Shape{3}));
  EXPECT_THAT(floats(out[1].second), ElementsAre(0, 1, 2));

  auto none = s.run({{"M", Tensor::fromVector<int64_t>(DataType::kInt64, {}, {0})},
                     {"v0", Tensor::fromVector<float>(DataType::kFloat32, {1}, {1})},
                     {"x", Tensor::fromVector<float>(DataType::kFloat32, {2}, {7, 8})}});
  EXPECT_THAT(floats(none[0].second), ElementsAre(1));
  EXPECT_EQ(none[1].second.shape(), (Shape{0}));
}

// count = Loop(M?, cond = true, count = 0) { count += 1; cond = count < limit, or stays true }.
onnx::ModelProto countingLoopModel(bool withTripCount, bool stopsAtLimit) {
  auto m = makeModel(13);
  if (withTripCount) addInput(m, "M", {}, onnx::TensorProto::INT64);
  addInput(m, "cond", {}, onnx::TensorProto::BOOL);
  addInput(m, "count0", {}, onnx::TensorProto::INT64);
  addInput(m, "limit", {}, onnx::TensorProto::INT64);
  auto* loop = m.mutable_graph()->add_node();
  loop->set_op_type("Loop");
  loop->set_name("loop");
  for (const char* in : {withTripCount ? "M" : "", "cond", "count0"}) loop->add_input(in);
  loop->add_output("count");
  auto* body = addGraphAttr(loop, "body");
  setValueInfo(body->add_input(), "i", onnx::TensorProto::INT64, {});
  setValueInfo(body->add_input(), "cond_in", onnx::TensorProto::BOOL, {});
  setValueInfo(body->add_input(), "c", onnx::TensorProto::INT64, {});
  auto* one = body->add_initializer();
  one->set_name("one");
  one->set_data_type(onnx::TensorProto::INT64);
  one->add_int64_data(1);
  addGraphNode(body, "Add", {"c", "one"}, {"c_next"});
  if (stopsAtLimit) {
    addGraphNode(body, "Less", {"c_next", "limit"}, {"cond_out"});
  } else {
    addGraphNode(body, "Identity", {"cond_in"}, {"cond_out"});
  }
  setValueInfo(body->add_output(), "cond_out", onnx::TensorProto::BOOL, {});
  setValueInfo(body->add_output(), "c_next", onnx::TensorProto::INT64, {});
  addOutput(m, "count", {}, onnx::TensorProto::INT64);
  return m;
}

NamedTensors countingLoopInputs(bool withTripCount, int64_t tripCount, int64_t limit) {
  NamedTensors in;
  if (withTripCount)
    in.emplace_back("M", Tensor::fromVector<int64_t>(DataType::kInt64, {}, {tripCount}));
  in.emplace_back("cond", Tensor::fromVector<uint8_t>(DataType::kBool, {}, {1}));
  in.emplace_back("count0", Tensor::fromVector<int64_t>(DataType::kInt64, {}, {0}));
  in.emplace_back("limit", Tensor::fromVector<int64_t>(DataType::kInt64, {}, {limit}));
  return in;
}

// A trip count of INT64_MAX is "no bound" read exactly (it once became INT64_MIN through a double
// and the loop ran zero times); the condition ends it.
TEST(ControlFlow, LoopWithTripCountInt64MaxRunsUntilItsCondition) {
  auto dir = tempDir("loop_int64_max");
  Session s(saveModel(countingLoopModel(true, true), dir / "m.onnx"));
  for (int64_t m : {INT64_MAX, INT64_MAX - 1}) {
    auto out = s.run(countingLoopInputs(true, m, 5));
    EXPECT_EQ(out[0].second.intAt(0), 5) << "M = " << m;
  }
  EXPECT_EQ(s.run(countingLoopInputs(true, 3, 5))[0].second.intAt(0), 3);
}

TEST(ControlFlowErrors, LoopThatNeverEndsStopsAtTheIterationCapNamingTheNode) {
  auto dir = tempDir("loop_cap");
  SessionOptions options;
  options.maxLoopIterations = 50;
  Session s(saveModel(countingLoopModel(false, false), dir / "m.onnx"), options);
  try {
    s.run(countingLoopInputs(false, 0, 0));
    FAIL() << "a loop whose condition stays true ran to completion";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRuntimeError);
    EXPECT_THAT(e.what(), HasSubstr("loop"));
    EXPECT_THAT(e.what(), HasSubstr("reached the cap of 50 iterations per run"));
  }
  // Under the cap, a loop that ends by its condition is unaffected.
  Session bounded(saveModel(countingLoopModel(false, true), dir / "b.onnx"), options);
  EXPECT_EQ(bounded.run(countingLoopInputs(false, 0, 50))[0].second.intAt(0), 50);
}

TEST(ControlFlowErrors, TerminateFlagStopsARunawayLoopFromAnotherThread) {
  auto dir = tempDir("loop_terminate");
  Session s(saveModel(countingLoopModel(false, false), dir / "m.onnx"));
  std::atomic<bool> terminate{false};
  RunOptions run;
  run.terminate = &terminate;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    terminate = true;
  });
  try {
    s.run(countingLoopInputs(false, 0, 0), run);
    ADD_FAILURE() << "the run did not stop";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRuntimeError);
    // Before a body node or the next iteration, whichever the flag is seen at.
    EXPECT_THAT(e.what(), HasSubstr("run terminated (RunOptions.terminate was set) before "));
  }
  stopper.join();
  // Set before the run: it stops before the first node.
  try {
    s.run(countingLoopInputs(false, 0, 0), run);
    ADD_FAILURE() << "the run did not stop";
  } catch (const Error& e) {
    EXPECT_THAT(
        e.what(),
        HasSubstr("run terminated (RunOptions.terminate was set) before node 'loop' (Loop)"));
  }
}

// x is read two levels down (an If inside a Loop body), v one level down; the else branch reads
// only v, so x is bound to nothing there.
TEST(ControlFlow, NestedSubgraphReadsAValueTwoLevelsUp) {
  auto m = makeModel(13);
  addInput(m, "M", {}, onnx::TensorProto::INT64);
  addInput(m, "v0", {2});
  addInput(m, "x", {2});
  auto* loop = m.mutable_graph()->add_node();
  loop->set_op_type("Loop");
  loop->set_name("loop");
  for (const char* in : {"M", "", "v0"}) loop->add_input(in);
  loop->add_output("v_final");
  auto* body = addGraphAttr(loop, "body");
  setValueInfo(body->add_input(), "i", onnx::TensorProto::INT64, {});
  setValueInfo(body->add_input(), "cond_in", onnx::TensorProto::BOOL, {});
  setValueInfo(body->add_input(), "v", onnx::TensorProto::FLOAT, {2});
  addGraphNode(body, "Identity", {"cond_in"}, {"cond_out"});
  auto* ifNode = addGraphNode(body, "If", {"cond_in"}, {"v_next"});
  auto* thenBranch = addGraphAttr(ifNode, "then_branch");
  addGraphNode(thenBranch, "Add", {"v", "x"}, {"sum"});
  setValueInfo(thenBranch->add_output(), "sum", onnx::TensorProto::FLOAT, {2});
  auto* elseBranch = addGraphAttr(ifNode, "else_branch");
  addGraphNode(elseBranch, "Identity", {"v"}, {"same"});
  setValueInfo(elseBranch->add_output(), "same", onnx::TensorProto::FLOAT, {2});
  setValueInfo(body->add_output(), "cond_out", onnx::TensorProto::BOOL, {});
  setValueInfo(body->add_output(), "v_next", onnx::TensorProto::FLOAT, {2});
  addOutput(m, "v_final", {2});

  auto dir = tempDir("nested");
  std::string path = saveModel(m, dir / "m.onnx");
  ir::Model model = onnx_import::loadModel(path);
  const ir::Node& loopNode = model.graph.nodes.at(0);
  EXPECT_EQ(loopNode.explicitInputs, 3);
  ASSERT_EQ(loopNode.inputs.size(), 4u);
  EXPECT_EQ(model.graph.value(loopNode.inputs[3]).name, "x");
  const ir::Node& inner = ir::attrGraph(loopNode, "body")->nodes.at(1);
  ASSERT_EQ(inner.opType, "If");
  EXPECT_EQ(inner.inputs.size(), 3u);  // cond_in, then v and x in first-use order
  auto elseGraph = ir::attrGraph(inner, "else_branch");
  ASSERT_EQ(elseGraph->outerInputs.size(), 2u);
  EXPECT_EQ(elseGraph->outerInputs[1], ir::kNoValue);

  Session s(path);
  auto out = s.run({{"M", Tensor::fromVector<int64_t>(DataType::kInt64, {}, {2})},
                    {"v0", Tensor::fromVector<float>(DataType::kFloat32, {2}, {1, 2})},
                    {"x", Tensor::fromVector<float>(DataType::kFloat32, {2}, {10, 20})}});
  EXPECT_THAT(floats(out.at(0).second), ElementsAre(21, 42));
}

// The implicit input count and the subgraph's outer inputs survive a plan, which still runs.
TEST(ControlFlow, PlanKeepsImplicitInputs) {
  std::string bytes = ifModel("x").SerializeAsString();
  RecordingLogger logger;
  NetworkDefinition network(logger);
  OnnxParser parser(network, logger);
  ASSERT_TRUE(parser.parse(bytes.data(), bytes.size()).ok()) << logger.text();
  auto plan = Builder(logger).buildSerializedNetwork(network, BuilderConfig{});
  ASSERT_TRUE(plan.ok()) << plan.status().toString();
  plan::Plan p = plan::readPlan(plan->data(), plan->size());
  const ir::Node& node = p.graph->nodes.at(0);
  EXPECT_EQ(node.explicitInputs, 1);
  ASSERT_EQ(node.inputs.size(), 2u);
  EXPECT_EQ(p.graph->value(node.inputs[1]).name, "x");
  auto thenBranch = ir::attrGraph(node, "then_branch");
  ASSERT_EQ(thenBranch->outerInputs.size(), 1u);
  EXPECT_EQ(thenBranch->value(thenBranch->outerInputs[0]).name, "x");
  EXPECT_EQ(plan::writePlan(p), *plan);

  auto engine = Runtime(logger).deserializeEngine(plan->data(), plan->size());
  ASSERT_TRUE(engine.ok()) << engine.status().toString();
  auto context = (*engine)->createExecutionContext();
  auto out = runContext(**context, **engine,
                        {{"cond", Tensor::fromVector<uint8_t>(DataType::kBool, {}, {0})},
                         {"x", Tensor::fromVector<float>(DataType::kFloat32, {3}, {1, 2, 3})}});
  EXPECT_THAT(floats(out["y"]), ElementsAre(-1, -2, -3));
}

TEST(ControlFlowErrors, SubgraphReadsANameNoScopeDefines) {
  auto dir = tempDir("if_ghost");
  std::string path = saveModel(ifModel("ghost"), dir / "m.onnx");
  try {
    onnx_import::loadModel(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("node 'if' (If)"));
    EXPECT_THAT(e.what(), HasSubstr("'ghost'"));
    EXPECT_THAT(e.what(), HasSubstr("no enclosing graph defines"));
  }
}

TEST(ControlFlowErrors, UnsupportedOperatorInsideABranchIsReportedAtLoad) {
  auto m = ifModel("x");
  m.mutable_graph()
      ->mutable_node(0)
      ->mutable_attribute(1)
      ->mutable_g()
      ->mutable_node(0)
      ->set_op_type("NoSuchOp");
  auto dir = tempDir("if_unsupported");
  std::string path = saveModel(m, dir / "m.onnx");
  try {
    Session s(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupportedNode);
    EXPECT_THAT(e.what(),
                HasSubstr("node 'if' (If) attribute 'else_branch' > node 'Neg_1' (NoSuchOp)"));
  }
}

}  // namespace
}  // namespace kiln
