// Shape programs (engine/shape_program.h): on dynamic models whose shapes are computed in the
// graph (BERT-style Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains, a classifier's
// x.view(x.size(0), -1) after a convolution with dynamic batch and H/W), the shapes the program
// resolves equal those of full inference plus constant folding on a copy of the graph (what the
// runtime did before), for several input shapes; and a run at a new input shape copies no graph.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/executor.h"
#include "engine/shape_program.h"
#include "engine_test_support.h"
#include "graph_loading.h"
#include "kiln/onnx_parser.h"
#include "model_builder.h"
#include "opt/passes.h"

namespace kiln {
namespace {

using namespace kiln::testing;

// An input or output whose dims are numbers or named symbols ("batch").
void addTensor(onnx::ValueInfoProto* vi, const std::string& name,
               const std::vector<std::string>& dims, int elemType = onnx::TensorProto::FLOAT) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elemType);
  for (const std::string& d : dims) {
    if (std::isdigit(static_cast<unsigned char>(d[0])))
      tt->mutable_shape()->add_dim()->set_dim_value(std::stoll(d));
    else
      tt->mutable_shape()->add_dim()->set_dim_param(d);
  }
}

void addScalarInt64(onnx::ModelProto& m, const std::string& name, int64_t value) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_int64_data(value);
}

// x[batch, seq, 8] as an attention block exports from PyTorch: split into 2 heads with a shape
// built from Shape(x), attend, merge the heads back with a shape sliced from Shape(context), then
// add seq-long position values made with Range and ConstantOfShape; also x flattened to
// [Size(x) / 8, 8].
onnx::ModelProto bertLikeModel() {
  auto m = makeModel(13);
  addTensor(m.mutable_graph()->add_input(), "x", {"batch", "seq", "8"});
  addScalarInt64(m, "zero", 0);
  addScalarInt64(m, "one", 1);
  addScalarInt64(m, "eight", 8);
  addInt64Initializer(m, "axis0", {0});
  addInt64Initializer(m, "heads_and_rest", {2, -1});
  addInt64Initializer(m, "minus_one", {-1});
  addInt64Initializer(m, "slice_begin", {0});
  addInt64Initializer(m, "slice_end", {2});
  addInt64Initializer(m, "axis2", {2});
  addNode(m, "Shape", {"x"}, {"x_shape"});
  addNode(m, "Gather", {"x_shape", "zero"}, {"batch"});
  addNode(m, "Gather", {"x_shape", "one"}, {"seq"});
  addNode(m, "Unsqueeze", {"batch", "axis0"}, {"batch_1"});
  addNode(m, "Unsqueeze", {"seq", "axis0"}, {"seq_1"});
  addNode(m, "Concat", {"batch_1", "seq_1", "heads_and_rest"}, {"split_shape"});
  setInt(lastNode(m), "axis", 0);
  addNode(m, "Reshape", {"x", "split_shape"}, {"split"});
  addNode(m, "Transpose", {"split"}, {"heads"});
  setInts(lastNode(m), "perm", {0, 2, 1, 3});
  addNode(m, "Transpose", {"heads"}, {"heads_t"});
  setInts(lastNode(m), "perm", {0, 1, 3, 2});
  addNode(m, "MatMul", {"heads", "heads_t"}, {"scores"});
  addNode(m, "Softmax", {"scores"}, {"weights"});
  setInt(lastNode(m), "axis", -1);
  addNode(m, "MatMul", {"weights", "heads"}, {"context"});
  addNode(m, "Transpose", {"context"}, {"merged"});
  setInts(lastNode(m), "perm", {0, 2, 1, 3});
  addNode(m, "Shape", {"merged"}, {"merged_shape"});
  addNode(m, "Slice", {"merged_shape", "slice_begin", "slice_end"}, {"batch_seq"});
  addNode(m, "Concat", {"batch_seq", "minus_one"}, {"merge_shape"});
  setInt(lastNode(m), "axis", 0);
  addNode(m, "Reshape", {"merged", "merge_shape"}, {"attended"});
  addNode(m, "Range", {"zero", "seq", "one"}, {"positions"});
  addNode(m, "Cast", {"positions"}, {"positions_f"});
  setInt(lastNode(m), "to", onnx::TensorProto::FLOAT);
  addNode(m, "Concat", {"batch_1", "seq_1"}, {"mask_shape"});
  setInt(lastNode(m), "axis", 0);
  addNode(m, "ConstantOfShape", {"mask_shape"}, {"mask"});
  auto* value = lastNode(m)->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_float_data(0.5f);
  addNode(m, "Mul", {"mask", "positions_f"}, {"position_values"});
  addNode(m, "Unsqueeze", {"position_values", "axis2"}, {"position_column"});
  addNode(m, "Add", {"attended", "position_column"}, {"y"});
  addNode(m, "Size", {"x"}, {"x_size"});
  addNode(m, "Div", {"x_size", "eight"}, {"rows"});
  addNode(m, "Unsqueeze", {"rows", "axis0"}, {"rows_1"});
  addNode(m, "Concat", {"rows_1", "eight_1"}, {"flat_shape"});
  setInt(lastNode(m), "axis", 0);
  addInt64Initializer(m, "eight_1", {8});
  addNode(m, "Reshape", {"x", "flat_shape"}, {"flat"});
  addTensor(m.mutable_graph()->add_output(), "y", {"batch", "seq", "8"});
  addTensor(m.mutable_graph()->add_output(), "flat", {"rows", "8"});
  return m;
}

// input[batch, 3, height, width] -> Conv 3x3 -> x.view(x.size(0), -1), as a classifier exports.
onnx::ModelProto convFlattenModel() {
  auto m = makeModel(13);
  addTensor(m.mutable_graph()->add_input(), "input", {"batch", "3", "height", "width"});
  std::vector<float> w(81);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<float>(static_cast<int>(i % 7) - 3) * 0.1f;
  addFloatInitializer(m, "weight", {3, 3, 3, 3}, w);
  addScalarInt64(m, "zero", 0);
  addInt64Initializer(m, "axis0", {0});
  addInt64Initializer(m, "minus_one", {-1});
  addNode(m, "Conv", {"input", "weight"}, {"features"});
  addNode(m, "Shape", {"features"}, {"features_shape"});
  addNode(m, "Gather", {"features_shape", "zero"}, {"batch"});
  addNode(m, "Unsqueeze", {"batch", "axis0"}, {"batch_1"});
  addNode(m, "Concat", {"batch_1", "minus_one"}, {"view_shape"});
  setInt(lastNode(m), "axis", 0);
  addNode(m, "Reshape", {"features", "view_shape"}, {"output"});
  addTensor(m.mutable_graph()->add_output(), "output", {"batch", "flat"});
  return m;
}

// The types the runtime resolved before shape programs: inference on a copy of the graph at
// these input shapes, then constant folding on another copy, taking the folded values' types.
std::vector<ir::TypeInfo> typesByInferenceAndFolding(
    const ir::Graph& graph, const std::vector<std::pair<int, Shape>>& inputShapes) {
  ir::Graph g = graph;
  for (const auto& [id, shape] : inputShapes) g.value(id).type.shape = ir::symShapeOf(shape);
  for (ir::Node& node : g.nodes)
    for (int id : node.outputs)
      if (id != ir::kNoValue) g.value(id).type = ir::TypeInfo{};
  ir::inferShapes(g);
  ir::Graph folded = g;
  opt::foldConstants(folded);
  std::vector<ir::TypeInfo> types;
  for (size_t id = 0; id < g.values.size(); ++id) {
    const ir::TypeInfo& known = folded.values[id].type;
    const bool concrete =
        known.shape && ir::concreteShape(*known.shape) && known.dtype != DataType::kUndefined;
    types.push_back(concrete ? known : g.values[id].type);
  }
  return types;
}

std::optional<Shape> concreteOf(const ir::TypeInfo& t) {
  return t.shape ? ir::concreteShape(*t.shape) : std::nullopt;
}

void expectSameShapesAsInference(const ir::Graph& graph, const ShapeProgram& program,
                                 const std::vector<std::pair<int, Shape>>& inputShapes) {
  const ShapeProgram::Resolution resolved = program.resolve(inputShapes);
  const std::vector<ir::TypeInfo> reference = typesByInferenceAndFolding(graph, inputShapes);
  ASSERT_EQ(resolved.types.size(), graph.values.size());
  for (size_t id = 0; id < graph.values.size(); ++id) {
    SCOPED_TRACE("value '" + graph.values[id].name + "'");
    const auto expected = concreteOf(reference[id]);
    const auto actual = concreteOf(resolved.types[id]);
    ASSERT_TRUE(expected) << "the reference leaves it unresolved";
    ASSERT_TRUE(actual) << "the shape program leaves it unresolved";
    EXPECT_EQ(*actual, *expected);
    EXPECT_EQ(resolved.types[id].dtype, reference[id].dtype);
  }
}

Tensor ramp(const Shape& shape) {
  Tensor t(DataType::kFloat32, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = static_cast<float>((i * 7) % 11) * 0.1f - 0.5f;
  return t;
}

std::vector<std::string> stepOps(const ir::Graph& graph, const ShapeProgram& program) {
  std::vector<std::string> ops;
  for (size_t node : program.stepNodes()) ops.push_back(graph.nodes[node].opType);
  return ops;
}

TEST(ShapeProgram, CompilesTheShapeComputingNodesOnly) {
  const ir::Graph g = loadInferredGraph(bertLikeModel(), "shape_program_steps");
  const ShapeProgram program(g);
  const std::vector<std::string> ops = stepOps(g, program);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Shape"), 2);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Size"), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Gather"), 2);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Concat"), 4);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Range"), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "ConstantOfShape"), 1);
  for (const char* dataOp : {"Reshape", "MatMul", "Softmax", "Transpose", "Add"})
    EXPECT_EQ(std::count(ops.begin(), ops.end(), dataOp), 0) << dataOp;
}

TEST(ShapeProgram, BertLikeShapesEqualFullInferenceAtSeveralShapes) {
  const ir::Graph g = loadInferredGraph(bertLikeModel(), "shape_program_bert");
  const ShapeProgram program(g);
  for (const Shape& shape : {Shape{1, 1, 8}, Shape{2, 5, 8}, Shape{3, 7, 8}, Shape{4, 16, 8}}) {
    SCOPED_TRACE(shapeToString(shape));
    expectSameShapesAsInference(g, program, {{g.findValue("x"), shape}});
    const ShapeProgram::Resolution r = program.resolve({{g.findValue("x"), shape}});
    EXPECT_EQ(*concreteOf(r.types[g.findValue("y")]), shape);
    EXPECT_EQ(*concreteOf(r.types[g.findValue("flat")]), (Shape{shape[0] * shape[1], 8}));
    EXPECT_EQ(r.values[g.findValue("merge_shape")].toInt64Vector(),
              (std::vector<int64_t>{shape[0], shape[1], -1}));
  }
}

TEST(ShapeProgram, ConvWithDynamicBatchAndSizeEqualsFullInference) {
  const ir::Graph g = loadInferredGraph(convFlattenModel(), "shape_program_conv");
  const ShapeProgram program(g);
  for (const Shape& shape : {Shape{1, 3, 10, 10}, Shape{2, 3, 10, 10}, Shape{1, 3, 20, 12}}) {
    SCOPED_TRACE(shapeToString(shape));
    expectSameShapesAsInference(g, program, {{g.findValue("input"), shape}});
    const ShapeProgram::Resolution r = program.resolve({{g.findValue("input"), shape}});
    EXPECT_EQ(*concreteOf(r.types[g.findValue("output")]),
              (Shape{shape[0], 3 * (shape[2] - 2) * (shape[3] - 2)}));
  }
}

TEST(ShapeProgram, LeavesLargeValuesToTheRun) {
  const ir::Graph g = loadInferredGraph(bertLikeModel(), "shape_program_large");
  const ShapeProgram program(g);
  // mask is batch x seq floats: computed at 2x5, too big to be a shape at 64x100.
  const int mask = g.findValue("mask");
  EXPECT_TRUE(program.resolve({{g.findValue("x"), {2, 5, 8}}}).values[mask].defined());
  const ShapeProgram::Resolution big = program.resolve({{g.findValue("x"), {64, 100, 8}}});
  EXPECT_FALSE(big.values[mask].defined());
  EXPECT_EQ(*concreteOf(big.types[mask]), (Shape{64, 100}));
  EXPECT_EQ(*concreteOf(big.types[g.findValue("y")]), (Shape{64, 100, 8}));
}

TEST(ShapeProgram, ARunAtANewInputShapeCopiesNoGraph) {
  auto graph =
      std::make_shared<ir::Graph>(loadInferredGraph(bertLikeModel(), "shape_program_copies"));
  const Executor executor(graph);
  ExecutorMemory memory;
  const int x = graph->findValue("x");
  executor.run({{x, ramp({1, 3, 8})}}, &memory);
  const uint64_t copiesBefore = ir::GraphCopyCounter::copies.load();
  for (const Shape& shape : {Shape{2, 5, 8}, Shape{3, 2, 8}, Shape{1, 9, 8}}) {
    std::vector<Tensor> outs = executor.run({{x, ramp(shape)}}, &memory);
    EXPECT_EQ(outs[0].shape(), shape);
    EXPECT_EQ(outs[1].shape(), (Shape{shape[0] * shape[1], 8}));
  }
  EXPECT_EQ(memory.planCount(), 4);  // planned again at every new shape...
  EXPECT_GT(memory.plan().placedTensors, 0);
  EXPECT_EQ(ir::GraphCopyCounter::copies.load(), copiesBefore);  // ...without copying the graph
}

TEST(ShapeProgram, AnEngineResolvesOutputShapesAndRunsAtNewShapesWithoutCopyingTheGraph) {
  const std::string path =
      saveModel(bertLikeModel(), tempDir("shape_program_engine") / "bert_like.onnx");
  RecordingLogger logger;
  auto builder = createBuilder(logger);
  auto network = builder->createNetwork();
  OnnxParser parser(*network, logger);
  ASSERT_TRUE(parser.parseFromFile(path).ok()) << logger.text();
  OptimizationProfile profile;
  profile.setDimensions("x", OptProfileSelector::kMIN, {1, 1, 8});
  profile.setDimensions("x", OptProfileSelector::kOPT, {2, 8, 8});
  profile.setDimensions("x", OptProfileSelector::kMAX, {4, 32, 8});
  BuilderConfig config;
  config.addOptimizationProfile(profile);
  auto engine = buildEngine(logger, *network, config);
  ASSERT_TRUE(engine);
  auto context = engine->createExecutionContext();
  ASSERT_TRUE(context.ok());
  const uint64_t copiesBefore = ir::GraphCopyCounter::copies.load();
  for (const Shape& shape : {Shape{1, 1, 8}, Shape{2, 5, 8}, Shape{4, 32, 8}, Shape{3, 7, 8}}) {
    SCOPED_TRACE(shapeToString(shape));
    ASSERT_TRUE((*context)->setInputShape("x", shape).ok());
    EXPECT_EQ(*(*context)->getTensorShape("y"), shape);
    EXPECT_EQ(*(*context)->getTensorShape("flat"), (Shape{shape[0] * shape[1], 8}));
    auto outputs = runContext(**context, *engine, {{"x", ramp(shape)}});
    EXPECT_EQ(outputs["y"].shape(), shape);
    EXPECT_EQ(outputs["flat"].shape(), (Shape{shape[0] * shape[1], 8}));
  }
  EXPECT_EQ(ir::GraphCopyCounter::copies.load(), copiesBefore);
}

}  // namespace
}  // namespace kiln
