// Optional values and ops (Optional, OptionalHasElement, OptionalGetElement), SequenceMap, sequence
// and optional graph inputs/outputs of a Session, and the .pb value files of `kiln run`
// (onnx/value_proto.h), checked against hand-computed values and their error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <onnx/onnx-data_pb.h>

#include <cstring>

#include "kiln/error.h"
#include "kiln/session.h"
#include "model_builder.h"
#include "onnx/value_proto.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace kiln::testing;

Tensor floats(Shape shape, std::vector<float> v) {
  return Tensor::fromVector<float>(DataType::kFloat32, std::move(shape), v);
}
std::vector<float> floatsOf(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// A value info of type optional(tensor(float)) or optional(seq(tensor(float))), or
// seq(tensor(float)).
void setKind(onnx::ValueInfoProto* vi, const std::string& name, bool optional, bool sequence) {
  vi->set_name(name);
  onnx::TypeProto* t = vi->mutable_type();
  if (optional) t = t->mutable_optional_type()->mutable_elem_type();
  if (sequence) t = t->mutable_sequence_type()->mutable_elem_type();
  t->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
}

onnx::NodeProto* node(onnx::GraphProto* g, const std::string& op,
                      const std::vector<std::string>& in, const std::vector<std::string>& out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(op + "_" + std::to_string(g->node_size()));
  for (const auto& i : in) n->add_input(i);
  for (const auto& o : out) n->add_output(o);
  return n;
}

NamedTensors run(const onnx::ModelProto& m, const std::string& name, const NamedTensors& feeds) {
  Session s(saveModel(m, tempDir("optseq_" + name) / "m.onnx"));
  return s.run(feeds);
}

bool boolOf(const Tensor& t) { return t.data<uint8_t>()[0] != 0; }

// has = OptionalHasElement(x); y = OptionalGetElement(x), x an optional float tensor input.
onnx::ModelProto optionalInputModel(int64_t opset) {
  auto m = makeModel(opset);
  setKind(m.mutable_graph()->add_input(), "x", true, false);
  node(m.mutable_graph(), "OptionalHasElement", {"x"}, {"has"});
  node(m.mutable_graph(), "OptionalGetElement", {"x"}, {"y"});
  addOutput(m, "has", {}, onnx::TensorProto::BOOL);
  auto* y = m.mutable_graph()->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return m;
}

TEST(OptionalOps, PresentOptionalInputHasElementAndUnwraps) {
  for (int64_t opset : {15, 18}) {
    auto out = run(optionalInputModel(opset), "present" + std::to_string(opset),
                   {{"x", floats({2}, {1.5f, -2})}});
    EXPECT_TRUE(boolOf(out[0].second));
    EXPECT_THAT(floatsOf(out[1].second), ElementsAre(1.5f, -2));
  }
}

TEST(OptionalOps, EmptyOptionalInputHasNoElementAndCannotBeUnwrapped) {
  auto m = optionalInputModel(18);
  m.mutable_graph()->mutable_output()->RemoveLast();
  m.mutable_graph()->mutable_node()->RemoveLast();
  auto out = run(m, "empty", {{"x", Tensor::none(DataType::kFloat32)}});
  EXPECT_FALSE(boolOf(out[0].second));
  try {
    run(optionalInputModel(18), "empty_get", {{"x", Tensor::none(DataType::kFloat32)}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("(OptionalGetElement): input is an empty optional"));
  }
}

TEST(OptionalOps, NoneIsRefusedForAPlainTensorInput) {
  auto m = makeModel(18);
  addInput(m, "x", {2});
  node(m.mutable_graph(), "OptionalHasElement", {"x"}, {"has"});
  addOutput(m, "has", {}, onnx::TensorProto::BOOL);
  try {
    run(m, "plain", {{"x", Tensor::none(DataType::kFloat32)}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("input 'x' is optional<float32>: none but is not an optional"));
  }
}

TEST(OptionalOps, HasElementWithoutInputIsFalseFromOpset18) {
  auto m = makeModel(18);
  node(m.mutable_graph(), "OptionalHasElement", {}, {"has"});
  addOutput(m, "has", {}, onnx::TensorProto::BOOL);
  EXPECT_FALSE(boolOf(run(m, "noinput", {})[0].second));
}

// opt = Optional(seq) or Optional<type=seq(tensor(float32))>() depending on cond (an If), then
// OptionalHasElement: the optional passes out of the If branches.
TEST(OptionalOps, OptionalOfSequenceThroughIfBranches) {
  auto m = makeModel(16);
  addInput(m, "cond", {}, onnx::TensorProto::BOOL);
  addInput(m, "x", {2});
  auto* ifNode = node(m.mutable_graph(), "If", {"cond"}, {"opt"});
  auto* thenAttr = ifNode->add_attribute();
  thenAttr->set_name("then_branch");
  thenAttr->set_type(onnx::AttributeProto::GRAPH);
  auto* empty = node(thenAttr->mutable_g(), "Optional", {}, {"none"});
  auto* type = empty->add_attribute();
  type->set_name("type");
  type->set_type(onnx::AttributeProto::TYPE_PROTO);
  type->mutable_tp()
      ->mutable_sequence_type()
      ->mutable_elem_type()
      ->mutable_tensor_type()
      ->set_elem_type(onnx::TensorProto::FLOAT);
  setKind(thenAttr->mutable_g()->add_output(), "none", true, true);
  auto* elseAttr = ifNode->add_attribute();
  elseAttr->set_name("else_branch");
  elseAttr->set_type(onnx::AttributeProto::GRAPH);
  node(elseAttr->mutable_g(), "SequenceConstruct", {"x", "x"}, {"seq"});
  node(elseAttr->mutable_g(), "Optional", {"seq"}, {"some"});
  setKind(elseAttr->mutable_g()->add_output(), "some", true, true);
  node(m.mutable_graph(), "OptionalHasElement", {"opt"}, {"has"});
  setKind(m.mutable_graph()->add_output(), "opt", true, true);
  addOutput(m, "has", {}, onnx::TensorProto::BOOL);
  const std::string path = saveModel(m, tempDir("optseq_if") / "m.onnx");
  Session s(path);
  EXPECT_TRUE(s.outputs()[0].isOptionalType && s.outputs()[0].isSequence);
  auto none = s.run({{"cond", Tensor::fromVector<uint8_t>(DataType::kBool, {}, {1})},
                     {"x", floats({2}, {1, 2})}});
  EXPECT_TRUE(none[0].second.isNone() && none[0].second.isNoneOfSequence());
  EXPECT_FALSE(boolOf(none[1].second));
  auto some = s.run({{"cond", Tensor::fromVector<uint8_t>(DataType::kBool, {}, {0})},
                     {"x", floats({2}, {1, 2})}});
  ASSERT_TRUE(some[0].second.isSequence());
  EXPECT_EQ(some[0].second.sequenceItems().size(), 2u);
  EXPECT_TRUE(boolOf(some[1].second));
}

// y = SequenceMap(seq, t) with body (a, b) -> (a * b, Shape(a)): t broadcast to every element.
onnx::ModelProto sequenceMapModel(bool secondIsSequence) {
  auto m = makeModel(17);
  setKind(m.mutable_graph()->add_input(), "seq", false, true);
  if (secondIsSequence)
    setKind(m.mutable_graph()->add_input(), "t", false, true);
  else
    addInput(m, "t", {2});
  auto* map = node(m.mutable_graph(), "SequenceMap", {"seq", "t"}, {"products", "shapes"});
  auto* body = map->add_attribute();
  body->set_name("body");
  body->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* g = body->mutable_g();
  g->set_name("body");
  setValueInfo(g->add_input(), "a", onnx::TensorProto::FLOAT, {2});
  setValueInfo(g->add_input(), "b", onnx::TensorProto::FLOAT, {2});
  node(g, "Mul", {"a", "b"}, {"p"});
  node(g, "Shape", {"a"}, {"s"});
  setValueInfo(g->add_output(), "p", onnx::TensorProto::FLOAT, {2});
  auto* s = g->add_output();
  s->set_name("s");  // dtype left to inference
  s->mutable_type()->mutable_tensor_type();
  setKind(m.mutable_graph()->add_output(), "products", false, true);
  auto* shapes = m.mutable_graph()->add_output();
  shapes->set_name("shapes");
  shapes->mutable_type()
      ->mutable_sequence_type()
      ->mutable_elem_type()
      ->mutable_tensor_type()
      ->set_elem_type(onnx::TensorProto::INT64);
  return m;
}

TEST(SequenceMap, BroadcastsATensorToEveryElement) {
  Tensor seq = Tensor::sequence(DataType::kFloat32,
                                {floats({2}, {1, 2}), floats({2}, {3, 4}), floats({2}, {5, 6})});
  auto out =
      run(sequenceMapModel(false), "map_tensor", {{"seq", seq}, {"t", floats({2}, {10, -1})}});
  const auto& products = out[0].second.sequenceItems();
  ASSERT_EQ(products.size(), 3u);
  EXPECT_THAT(floatsOf(products[0]), ElementsAre(10, -2));
  EXPECT_THAT(floatsOf(products[2]), ElementsAre(50, -6));
  const auto& shapes = out[1].second.sequenceItems();
  ASSERT_EQ(shapes.size(), 3u);
  EXPECT_EQ(out[1].second.dtype(), DataType::kInt64);
  EXPECT_EQ(shapes[1].data<int64_t>()[0], 2);
}

TEST(SequenceMap, MapsSequencesElementWiseAndChecksTheirLengths) {
  Tensor a = Tensor::sequence(DataType::kFloat32, {floats({2}, {1, 2}), floats({2}, {3, 4})});
  Tensor b = Tensor::sequence(DataType::kFloat32, {floats({2}, {2, 2}), floats({2}, {0.5f, 3})});
  auto out = run(sequenceMapModel(true), "map_seq", {{"seq", a}, {"t", b}});
  EXPECT_THAT(floatsOf(out[0].second.sequenceItems()[1]), ElementsAre(1.5f, 12));
  Tensor shorter = Tensor::sequence(DataType::kFloat32, {floats({2}, {2, 2})});
  try {
    run(sequenceMapModel(true), "map_seq_bad", {{"seq", a}, {"t", shorter}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("input 1 is a sequence of 1 tensors but input 0 has 2"));
  }
}

TEST(SequenceMap, EmptySequenceGivesEmptySequencesOfTheBodyTypes) {
  auto out = run(sequenceMapModel(false), "map_empty",
                 {{"seq", Tensor::sequence(DataType::kFloat32, {})}, {"t", floats({2}, {1, 1})}});
  EXPECT_TRUE(out[0].second.isSequence() && out[0].second.sequenceItems().empty());
  EXPECT_EQ(out[1].second.dtype(), DataType::kInt64);  // from inference over the body
}

TEST(ValueFiles, RoundTripsTensorsSequencesAndOptionals) {
  using onnx_import::ValueType;
  const auto dir = tempDir("value_files");
  Tensor bf =
      Tensor::fromVector<uint16_t>(DataType::kUint16, {2}, {0x3f80, 0xc000});  // bfloat16 1, -2
  Tensor bf16(DataType::kBFloat16, {2});
  std::memcpy(bf16.raw(), bf.raw(), 4);
  const std::vector<std::pair<Tensor, ValueType>> cases = {
      {bf16, {DataType::kBFloat16, false, false}},
      {Tensor::sequence(DataType::kFloat32, {floats({1}, {7}), floats({2}, {8, 9})}),
       {DataType::kFloat32, true, false}},
      {floats({2}, {1, 2}), {DataType::kFloat32, false, true}},
      {Tensor::none(DataType::kFloat32, true), {DataType::kFloat32, true, true}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto path = (dir / ("v" + std::to_string(i) + ".pb")).string();
    onnx_import::writeValueFile(path, cases[i].first, cases[i].second, "v");
    Tensor back = onnx_import::readValueFile(path, cases[i].second, "input 'v'");
    EXPECT_EQ(back.describe(), cases[i].first.describe()) << i;
    if (back.isSequence())
      EXPECT_THAT(floatsOf(back.sequenceItems()[1]), ElementsAre(8, 9));
    else if (!back.isNone())
      EXPECT_EQ(std::memcmp(back.raw(), cases[i].first.raw(), back.byteSize()), 0) << i;
  }
}

TEST(ValueFiles, NamesTheMessageAFileHoldsWhenItIsNotTheExpectedOne) {
  const auto dir = tempDir("value_files_bad");
  const auto tensorFile = (dir / "x.pb").string();
  onnx_import::writeValueFile(tensorFile, floats({2}, {1, 2}), {DataType::kFloat32, false, false},
                              "x");
  try {
    onnx_import::readValueFile(tensorFile, {DataType::kFloat32, true, false}, "input 'x'");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("input 'x' is a sequence of float32; " + tensorFile +
                                    " holds a TensorProto, not a SequenceProto"));
  }
  try {
    onnx_import::readValueFile(tensorFile, {DataType::kInt64, false, false}, "input 'x'");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("holds float32 values, expected int64"));
  }
  const auto seqFile = (dir / "s.pb").string();
  onnx_import::writeValueFile(seqFile, Tensor::sequence(DataType::kFloat32, {floats({1}, {1})}),
                              {DataType::kFloat32, true, false}, "s");
  try {
    onnx_import::readValueFile(seqFile, {DataType::kFloat32, false, false}, "input 's'");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("holds a SequenceProto, not a TensorProto"));
  }
}

}  // namespace
}  // namespace kiln
