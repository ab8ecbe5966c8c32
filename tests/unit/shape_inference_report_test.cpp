// ir::inferShapesCollectingErrors (kiln check): every failing node reported, the nodes after a
// failure left uninferred, independent nodes still inferred.
#include <gtest/gtest.h>

#include "ir/shape_inference_report.h"
#include "model_builder.h"
#include "onnx/loader.h"

namespace kiln {
namespace {

using namespace kiln::testing;

TEST(ShapeInferenceReport, CollectsEveryFailingNodeAndSkipsTheirConsumers) {
  onnx::ModelProto model = makeModel(13);
  addInput(model, "x", {2, 3});
  addFloatInitializer(model, "w45", {4, 5}, std::vector<float>(20, 1.0f));
  addFloatInitializer(model, "w34", {3, 4}, std::vector<float>(12, 1.0f));
  addNode(model, "MatMul", {"x", "w45"}, {"bad1"}, "mm_bad1");    // 3 vs 4
  addNode(model, "Relu", {"bad1"}, {"after_bad"}, "relu_after");  // reads a failed node: skipped
  addNode(model, "MatMul", {"x", "x"}, {"bad2"}, "mm_bad2");      // 3 vs 2
  addNode(model, "MatMul", {"x", "w34"}, {"good"}, "mm_good");
  addOutput(model, "after_bad", {});
  addOutput(model, "bad2", {});
  addOutput(model, "good", {});
  for (auto& out : *model.mutable_graph()->mutable_output())
    out.mutable_type()->mutable_tensor_type()->clear_shape();
  ir::Model loaded = onnx_import::loadModel(saveModel(model, tempDir("shape_report") / "m.onnx"));

  const std::vector<std::string> errors = ir::inferShapesCollectingErrors(loaded.graph);

  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("node 'mm_bad1' (MatMul)"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("node 'mm_bad2' (MatMul)"), std::string::npos) << errors[1];
  const ir::Value& good = loaded.graph.value(loaded.graph.findValue("good"));
  ASSERT_TRUE(good.type.shape.has_value());
  EXPECT_EQ(ir::symShapeToString(*good.type.shape), "2x4");
  const ir::Value& after = loaded.graph.value(loaded.graph.findValue("after_bad"));
  EXPECT_FALSE(after.type.shape.has_value());  // not inferred: its input never was
}

}  // namespace
}  // namespace kiln
