// Sequence values and the sequence ops: SequenceEmpty/Construct/Insert/Erase/At/Length,
// SplitToSequence and ConcatFromSequence, checked against hand-computed results, their
// out-of-range errors, and a plan round trip that keeps a value's sequence type.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/plan_format.h"
#include "engine_test_support.h"
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

std::vector<float> floatsOf(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

Tensor int64Scalar(int64_t v) { return Tensor::fromVector<int64_t>(DataType::kInt64, {}, {v}); }

// A graph output of unknown shape (a tensor taken out of a sequence).
void addOutputAnyShape(onnx::ModelProto& m, const std::string& name) {
  auto* vi = m.mutable_graph()->add_output();
  vi->set_name(name);
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
}

onnx::NodeProto& lastNode(onnx::ModelProto& m) {
  return *m.mutable_graph()->mutable_node(m.graph().node_size() - 1);
}

void intAttr(onnx::ModelProto& m, const std::string& name, int64_t v) {
  auto* a = lastNode(m).add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

// a, b, c: float [2] tensors; seq = [a, b, c]; output y = node applied to seq.
onnx::ModelProto threeItemModel() {
  auto m = makeModel(13);
  for (const char* n : {"a", "b", "c"}) addInput(m, n, {2});
  addNode(m, "SequenceConstruct", {"a", "b", "c"}, {"seq"});
  return m;
}

NamedTensors feedsABC() {
  return {{"a", floats({2}, {1, 2})}, {"b", floats({2}, {3, 4})}, {"c", floats({2}, {5, 6})}};
}

NamedTensors runModel(const onnx::ModelProto& m, const std::string& name,
                      const NamedTensors& feeds) {
  auto dir = tempDir("seq_" + name);
  Session s(saveModel(m, dir / "m.onnx"));
  return s.run(feeds);
}

TEST(SequenceOps, AtWithNegativeIndexAndLength) {
  auto m = threeItemModel();
  addInput(m, "i", {}, onnx::TensorProto::INT64);
  addNode(m, "SequenceAt", {"seq", "i"}, {"y"});
  addNode(m, "SequenceLength", {"seq"}, {"n"});
  addOutput(m, "y", {2});
  addOutput(m, "n", {}, onnx::TensorProto::INT64);
  NamedTensors feeds = feedsABC();
  feeds.emplace_back("i", int64Scalar(-1));
  auto out = runModel(m, "at", feeds);
  EXPECT_THAT(floatsOf(out[0].second), ElementsAre(5, 6));
  EXPECT_EQ(out[1].second.intAt(0), 3);
  feeds.back().second = int64Scalar(-3);
  EXPECT_THAT(floatsOf(runModel(m, "at0", feeds)[0].second), ElementsAre(1, 2));
}

TEST(SequenceOps, IdentityPassesASequenceThrough) {
  auto m = threeItemModel();
  addNode(m, "Identity", {"seq"}, {"same"});
  addNode(m, "SequenceLength", {"same"}, {"n"});
  addOutput(m, "n", {}, onnx::TensorProto::INT64);
  EXPECT_EQ(runModel(m, "identity", feedsABC())[0].second.intAt(0), 3);
}

TEST(SequenceOps, AtOutOfRangeNamesNodeAndPosition) {
  auto m = threeItemModel();
  addInput(m, "i", {}, onnx::TensorProto::INT64);
  addNode(m, "SequenceAt", {"seq", "i"}, {"y"}, "pick");
  addOutput(m, "y", {2});
  NamedTensors feeds = feedsABC();
  feeds.emplace_back("i", int64Scalar(3));
  try {
    runModel(m, "at_range", feeds);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("node 'pick' (SequenceAt)"));
    EXPECT_THAT(e.what(), HasSubstr("position 3 is out of range for a sequence of 3 tensors"));
  }
}

TEST(SequenceOps, InsertEraseWithNegativePositions) {
  // [a, b, c] -insert d at -1-> [a, b, d, c] -erase at -4-> [b, d, c]; concat along axis 0.
  auto m = threeItemModel();
  addInput(m, "d", {2});
  addNode(m, "Constant", {}, {"minus1"});
  {
    auto* a = lastNode(m).add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
    a->mutable_t()->add_int64_data(-1);
  }
  addNode(m, "SequenceInsert", {"seq", "d", "minus1"}, {"seq2"});
  addInput(m, "e", {}, onnx::TensorProto::INT32);
  addNode(m, "SequenceErase", {"seq2", "e"}, {"seq3"});
  addNode(m, "ConcatFromSequence", {"seq3"}, {"y"});
  intAttr(m, "axis", 0);
  addOutput(m, "y", {6});
  NamedTensors feeds = feedsABC();
  feeds.emplace_back("d", floats({2}, {7, 8}));
  feeds.emplace_back("e", Tensor::fromVector<int32_t>(DataType::kInt32, {}, {-4}));
  EXPECT_THAT(floatsOf(runModel(m, "insert_erase", feeds)[0].second),
              ElementsAre(3, 4, 7, 8, 5, 6));
}

TEST(SequenceOps, EmptyThenInsertAtEndAndEraseLast) {
  auto m = makeModel(13);
  addInput(m, "a", {2});
  addInput(m, "b", {2});
  addNode(m, "SequenceEmpty", {}, {"s0"});
  addNode(m, "SequenceInsert", {"s0", "a"}, {"s1"});
  addNode(m, "SequenceInsert", {"s1", "b"}, {"s2"});
  addNode(m, "SequenceInsert", {"s2", "a"}, {"s3"});
  addNode(m, "SequenceErase", {"s3"}, {"s4"});  // drops the last a
  addNode(m, "ConcatFromSequence", {"s4"}, {"y"});
  intAttr(m, "axis", 0);
  intAttr(m, "new_axis", 1);
  addNode(m, "SequenceLength", {"s0"}, {"n"});
  addOutput(m, "y", {2, 2});
  addOutput(m, "n", {}, onnx::TensorProto::INT64);
  auto out = runModel(m, "empty", {{"a", floats({2}, {1, 2})}, {"b", floats({2}, {3, 4})}});
  EXPECT_EQ(out[0].second.shape(), (Shape{2, 2}));
  EXPECT_THAT(floatsOf(out[0].second), ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(out[1].second.intAt(0), 0);
}

TEST(SequenceOps, ConcatFromSequenceNewAxisLast) {
  // Stacking [1,2] and [3,4] on a new last axis gives [[1,3],[2,4]].
  auto m = makeModel(13);
  addInput(m, "a", {2});
  addInput(m, "b", {2});
  addNode(m, "SequenceConstruct", {"a", "b"}, {"seq"});
  addNode(m, "ConcatFromSequence", {"seq"}, {"y"});
  intAttr(m, "axis", -1);
  intAttr(m, "new_axis", 1);
  addOutput(m, "y", {2, 2});
  auto out = runModel(m, "stack", {{"a", floats({2}, {1, 2})}, {"b", floats({2}, {3, 4})}});
  EXPECT_EQ(out[0].second.shape(), (Shape{2, 2}));
  EXPECT_THAT(floatsOf(out[0].second), ElementsAre(1, 3, 2, 4));
}

TEST(SequenceOps, ConcatFromSequenceRejectsMismatchedShapes) {
  auto m = makeModel(13);
  addInput(m, "a", {2});
  addInput(m, "b", {2, 1});
  addNode(m, "SequenceConstruct", {"a", "b"}, {"seq"});
  addNode(m, "ConcatFromSequence", {"seq"}, {"y"}, "cat");
  intAttr(m, "axis", 0);
  addOutputAnyShape(m, "y");
  try {
    runModel(m, "cat_bad", {{"a", floats({2}, {1, 2})}, {"b", floats({2, 1}, {3, 4})}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("node 'cat' (ConcatFromSequence)"));
    EXPECT_THAT(e.what(), HasSubstr("sequence item 1"));
  }
}

// x = [[0,1,2],[3,4,5]] split along axis 1.
Tensor x23() { return floats({2, 3}, {0, 1, 2, 3, 4, 5}); }

onnx::ModelProto splitModel(bool withSplit, int64_t keepdims) {
  auto m = makeModel(13);
  addInput(m, "x", {2, 3});
  if (withSplit) addInput(m, "split", {-1}, onnx::TensorProto::INT64);
  addNode(m, "SplitToSequence",
          withSplit ? std::vector<std::string>{"x", "split"} : std::vector<std::string>{"x"},
          {"seq"});
  intAttr(m, "axis", 1);
  intAttr(m, "keepdims", keepdims);
  addInput(m, "i", {}, onnx::TensorProto::INT64);
  addNode(m, "SequenceAt", {"seq", "i"}, {"y"});
  addNode(m, "SequenceLength", {"seq"}, {"n"});
  addOutputAnyShape(m, "y");
  addOutput(m, "n", {}, onnx::TensorProto::INT64);
  return m;
}

TEST(SequenceOps, SplitToSequenceWithoutSplitHonoursKeepdims) {
  auto kept = runModel(splitModel(false, 1), "split_keep", {{"x", x23()}, {"i", int64Scalar(1)}});
  EXPECT_EQ(kept[0].second.shape(), (Shape{2, 1}));
  EXPECT_THAT(floatsOf(kept[0].second), ElementsAre(1, 4));
  EXPECT_EQ(kept[1].second.intAt(0), 3);
  auto squeezed =
      runModel(splitModel(false, 0), "split_squeeze", {{"x", x23()}, {"i", int64Scalar(2)}});
  EXPECT_EQ(squeezed[0].second.shape(), (Shape{2}));
  EXPECT_THAT(floatsOf(squeezed[0].second), ElementsAre(2, 5));
}

TEST(SequenceOps, SplitToSequenceWithLengthsAndScalarSize) {
  // Lengths [1, 2]: keepdims is ignored, the second chunk is [[1,2],[4,5]].
  auto lengths = runModel(splitModel(true, 0), "split_lengths",
                          {{"x", x23()},
                           {"split", Tensor::fromVector<int64_t>(DataType::kInt64, {2}, {1, 2})},
                           {"i", int64Scalar(1)}});
  EXPECT_EQ(lengths[0].second.shape(), (Shape{2, 2}));
  EXPECT_THAT(floatsOf(lengths[0].second), ElementsAre(1, 2, 4, 5));
  EXPECT_EQ(lengths[1].second.intAt(0), 2);
  // A scalar size 2 over 3 columns: chunks of 2 and 1.
  auto m = splitModel(true, 1);
  m.mutable_graph()->mutable_input(1)->clear_type();  // a scalar split
  setValueInfo(m.mutable_graph()->mutable_input(1), "split", onnx::TensorProto::INT64, {});
  auto sized = runModel(m, "split_scalar",
                        {{"x", x23()}, {"split", int64Scalar(2)}, {"i", int64Scalar(-1)}});
  EXPECT_EQ(sized[0].second.shape(), (Shape{2, 1}));
  EXPECT_THAT(floatsOf(sized[0].second), ElementsAre(2, 5));
  EXPECT_EQ(sized[1].second.intAt(0), 2);
}

TEST(SequenceOps, SplitLengthsMustCoverTheAxis) {
  try {
    runModel(splitModel(true, 1), "split_bad",
             {{"x", x23()},
              {"split", Tensor::fromVector<int64_t>(DataType::kInt64, {2}, {1, 1})},
              {"i", int64Scalar(0)}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("(SplitToSequence)"));
    EXPECT_THAT(e.what(), HasSubstr("split lengths sum to 2 but the axis has 3 elements"));
  }
}

TEST(SequenceOps, SequenceValueTypeSurvivesAPlan) {
  auto m = threeItemModel();
  addInput(m, "i", {}, onnx::TensorProto::INT64);
  addNode(m, "SequenceAt", {"seq", "i"}, {"y"});
  addOutput(m, "y", {2});
  std::string bytes = m.SerializeAsString();
  RecordingLogger logger;
  NetworkDefinition network(logger);
  OnnxParser parser(network, logger);
  ASSERT_TRUE(parser.parse(bytes.data(), bytes.size()).ok()) << logger.text();
  auto plan = Builder(logger).buildSerializedNetwork(network, BuilderConfig{});
  ASSERT_TRUE(plan.ok()) << plan.status().toString();
  plan::Plan p = plan::readPlan(plan->data(), plan->size());
  const ir::Value& seq = p.graph->value(p.graph->findValue("seq"));
  EXPECT_TRUE(seq.type.isSequence);
  EXPECT_EQ(seq.type.dtype, DataType::kFloat32);
  EXPECT_EQ(plan::writePlan(p), *plan);

  auto engine = Runtime(logger).deserializeEngine(plan->data(), plan->size());
  ASSERT_TRUE(engine.ok()) << engine.status().toString();
  auto context = (*engine)->createExecutionContext();
  auto out = runContext(**context, **engine,
                        {{"a", floats({2}, {1, 2})},
                         {"b", floats({2}, {3, 4})},
                         {"c", floats({2}, {5, 6})},
                         {"i", int64Scalar(1)}});
  EXPECT_THAT(floatsOf(out["y"]), ElementsAre(3, 4));
}

TEST(SequenceValue, HoldsOneElementTypeAndNoStorage) {
  Tensor s = Tensor::sequence(DataType::kFloat32, {floats({2}, {1, 2})});
  EXPECT_TRUE(s.isSequence());
  EXPECT_EQ(s.byteSize(), 0u);
  EXPECT_EQ(s.describe(), "sequence<float32>[1 items]");
  EXPECT_THROW(Tensor::sequence(DataType::kInt64, {floats({1}, {1})}), Error);
}

TEST(MapValue, PairsKeysWithValuesAndSequencesOfMapsKeepTheirTypes) {
  const Tensor keys = Tensor::fromVector<int64_t>(DataType::kInt64, {2}, {3, 7});
  const Tensor m = Tensor::map(keys, floats({2}, {0.25f, 0.75f}));
  EXPECT_TRUE(m.isMap());
  EXPECT_FALSE(m.isSequence());
  EXPECT_EQ(m.mapKeyType(), DataType::kInt64);
  EXPECT_EQ(m.describe(), "map<int64,float32>[2 entries]");
  EXPECT_THAT(floatsOf(m.mapValues()), ElementsAre(0.25f, 0.75f));
  EXPECT_EQ(m.mapKeys().data<int64_t>()[1], 7);
  const Tensor s = Tensor::sequenceOfMaps(DataType::kInt64, DataType::kFloat32, {m, m});
  EXPECT_TRUE(s.isSequence());
  EXPECT_EQ(s.mapKeyType(), DataType::kInt64);
  EXPECT_EQ(s.sequenceItems().size(), 2u);
  EXPECT_EQ(s.describe(), "sequence<map<int64,float32>>[2 items]");
  EXPECT_EQ(Tensor::sequenceOfMaps(DataType::kString, DataType::kFloat32, {}).describe(),
            "sequence<map<string,float32>>[0 items]");
  // Keys of another type or length, and maps in a plain sequence or of other key types, are
  // refused.
  EXPECT_THROW(Tensor::map(floats({2}, {1, 2}), floats({2}, {1, 2})), Error);
  EXPECT_THROW(Tensor::map(keys, floats({3}, {1, 2, 3})), Error);
  EXPECT_THROW(Tensor::sequence(DataType::kFloat32, {m}), Error);
  EXPECT_THROW(Tensor::sequenceOfMaps(DataType::kString, DataType::kFloat32, {m}), Error);
  EXPECT_THROW(floats({1}, {1}).mapKeys(), Error);
}

}  // namespace
}  // namespace kiln
