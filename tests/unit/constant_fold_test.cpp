// Constant folding: constant subgraphs and Shape/Size of static shapes become constants.
#include <gtest/gtest.h>

#include "ir/op_schema.h"
#include "model_builder.h"
#include "onnx/loader.h"
#include "opt/passes.h"

namespace kiln {
namespace {

using namespace kiln::testing;

// x[2,3,4] -> Shape -> Slice[0:1] -> Concat with [-1] -> Reshape(x) -> y, as PyTorch exports a
// flatten.
ir::Graph flattenGraph(const std::vector<int64_t>& inputDims) {
  auto m = makeModel(13);
  addInput(m, "x", inputDims);
  addInt64Initializer(m, "zero", {0});
  addInt64Initializer(m, "one", {1});
  addInt64Initializer(m, "minus_one", {-1});
  addNode(m, "Shape", {"x"}, {"shape"}, "shape");
  addNode(m, "Slice", {"shape", "zero", "one"}, {"batch"}, "slice");
  addNode(m, "Concat", {"batch", "minus_one"}, {"target"}, "concat");
  m.mutable_graph()->mutable_node(2)->add_attribute()->set_name("axis");
  m.mutable_graph()->mutable_node(2)->mutable_attribute(0)->set_type(onnx::AttributeProto::INT);
  m.mutable_graph()->mutable_node(2)->mutable_attribute(0)->set_i(0);
  addNode(m, "Reshape", {"x", "target"}, {"y"}, "reshape");
  addOutput(m, "y", {});
  m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  auto dir = tempDir("fold");
  ir::Model model = onnx_import::loadModel(saveModel(m, dir / "m.onnx"));
  ir::inferShapes(model.graph);
  return model.graph;
}

TEST(ConstantFolding, ShapeOfAStaticInputFoldsThroughTheChain) {
  ir::Graph g = flattenGraph({2, 3, 4});
  EXPECT_EQ(opt::foldConstants(g), 3);  // Shape, Slice, Concat
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].opType, "Reshape");
  const auto& y = g.value(g.outputs[0]).type;
  ASSERT_TRUE(y.shape.has_value());
  EXPECT_EQ(ir::symShapeToString(*y.shape), "2x12");
}

TEST(ConstantFolding, ShapeOfASymbolicInputStays) {
  ir::Graph g = flattenGraph({-1, 3, 4});
  EXPECT_EQ(opt::foldConstants(g), 0);
  EXPECT_EQ(g.nodes.size(), 4u);
}

TEST(DeadNodeElimination, RemovesNodesNobodyReads) {
  auto m = makeModel(13);
  addInput(m, "x", {3});
  addNode(m, "Relu", {"x"}, {"unused"}, "dead");
  addNode(m, "Neg", {"x"}, {"y"}, "live");
  addOutput(m, "y", {3});
  auto dir = tempDir("dce");
  ir::Model model = onnx_import::loadModel(saveModel(m, dir / "m.onnx"));
  EXPECT_EQ(opt::eliminateDeadNodes(model.graph), 1);
  ASSERT_EQ(model.graph.nodes.size(), 1u);
  EXPECT_EQ(model.graph.nodes[0].name, "live");
}

}  // namespace
}  // namespace kiln
