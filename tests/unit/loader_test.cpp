// ONNX loading: storage forms, graph fixes (sorting, defaults), and errors for malformed files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "kiln/error.h"
#include "kiln/session.h"
#include "model_builder.h"
#include "onnx/loader.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace kiln::testing;

// Runs fn, expects a kiln::Error whose message contains every fragment.
template <typename Fn>
void expectError(Fn fn, std::initializer_list<const char*> fragments) {
  try {
    fn();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    for (const char* f : fragments) EXPECT_THAT(e.what(), HasSubstr(f));
  }
}

onnx::ModelProto addReluModel() {
  auto m = makeModel();
  addInput(m, "x", {-1, 3});
  addFloatInitializer(m, "b", {3}, {1, -2, 3});
  addNode(m, "Add", {"x", "b"}, {"s"}, "add");
  addNode(m, "Relu", {"s"}, {"y"}, "relu");
  addOutput(m, "y", {-1, 3});
  return m;
}

std::vector<float> runFloat(const std::string& path, const std::vector<float>& x,
                            const Shape& shape) {
  Session s(path);
  auto out = s.run({{"x", Tensor::fromVector<float>(DataType::kFloat32, shape, x)}});
  const Tensor& y = out.at(0).second;
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
}

TEST(Loader, RunsAValidModelWithSymbolicBatch) {
  auto dir = tempDir("valid");
  std::string path = saveModel(addReluModel(), dir / "m.onnx");
  ir::Model model = onnx_import::loadModel(path);
  EXPECT_EQ(model.opsets.at(""), 13);
  EXPECT_EQ(model.producerName, "kiln-tests");
  const auto& in = model.graph.value(model.graph.inputs[0]);
  EXPECT_EQ((*in.type.shape)[0].symbol, "N");
  EXPECT_THAT(runFloat(path, {1, 2, -3, 0, 0, 0}, {2, 3}),
              ::testing::ElementsAre(2, 0, 0, 1, 0, 3));
}

TEST(Loader, SortsNodesThatAreOutOfOrder) {
  auto m = makeModel();
  addInput(m, "x", {3});
  addNode(m, "Relu", {"s"}, {"y"}, "relu");
  addNode(m, "Neg", {"x"}, {"s"}, "neg");
  addOutput(m, "y", {3});
  auto dir = tempDir("sort");
  EXPECT_THAT(runFloat(saveModel(m, dir / "m.onnx"), {1, -2, 3}, {3}),
              ::testing::ElementsAre(0, 2, 0));
}

TEST(Loader, InitializerThatIsAlsoAnInputIsAnOverridableDefault) {
  auto m = addReluModel();
  addInput(m, "b", {3});
  auto dir = tempDir("default");
  std::string path = saveModel(m, dir / "m.onnx");
  Session s(path);
  ASSERT_EQ(s.inputs().size(), 2u);
  EXPECT_TRUE(s.inputs()[1].optional);
  auto x = Tensor::fromVector<float>(DataType::kFloat32, {1, 3}, {0, 0, 0});
  auto withDefault = s.run({{"x", x}});
  EXPECT_EQ(withDefault[0].second.data<float>()[0], 1.0f);
  auto b = Tensor::fromVector<float>(DataType::kFloat32, {3}, {5, 5, 5});
  auto overridden = s.run({{"x", x}, {"b", b}});
  EXPECT_EQ(overridden[0].second.data<float>()[2], 5.0f);
}

TEST(Loader, ReadsTypedFieldsRawDataAndExternalData) {
  auto dir = tempDir("storage");
  auto m = makeModel();
  addInput(m, "x", {2});
  auto* raw = m.mutable_graph()->add_initializer();
  raw->set_name("raw");
  raw->set_data_type(onnx::TensorProto::FLOAT);
  raw->add_dims(2);
  float rawValues[2] = {10, 20};
  raw->set_raw_data(std::string(reinterpret_cast<char*>(rawValues), sizeof(rawValues)));
  auto* ext = m.mutable_graph()->add_initializer();
  ext->set_name("ext");
  ext->set_data_type(onnx::TensorProto::FLOAT);
  ext->add_dims(2);
  ext->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = ext->add_external_data();
  kv->set_key("location");
  kv->set_value("weights.bin");
  kv = ext->add_external_data();
  kv->set_key("offset");
  kv->set_value("4");
  float extValues[3] = {0, 100, 200};  // offset 4 skips the first float
  writeBytes(dir / "weights.bin",
             std::string(reinterpret_cast<char*>(extValues), sizeof(extValues)));
  addNode(m, "Add", {"x", "raw"}, {"s"});
  addNode(m, "Add", {"s", "ext"}, {"y"});
  addOutput(m, "y", {2});
  EXPECT_THAT(runFloat(saveModel(m, dir / "m.onnx"), {1, 2}, {2}),
              ::testing::ElementsAre(111, 222));
}

TEST(LoaderErrors, TruncatedFile) {
  auto dir = tempDir("truncated");
  auto m = addReluModel();
  std::string bytes = m.SerializeAsString();
  writeBytes(dir / "m.onnx", bytes.substr(0, bytes.size() - 7));
  expectError([&] { onnx_import::loadModel((dir / "m.onnx").string()); },
              {"m.onnx", "not a valid ONNX model"});
}

// If nodes nested `depth` deep: each then-branch holds the next If; the innermost branches are
// Identity of the outer scope's "x".
onnx::ModelProto nestedIfModel(int depth) {
  auto m = makeModel();
  addInput(m, "x", {1});
  addInput(m, "c", {}, onnx::TensorProto::BOOL);
  onnx::GraphProto* graph = m.mutable_graph();
  for (int level = 0; level < depth; ++level) {
    onnx::NodeProto* node = graph->add_node();
    node->set_op_type("If");
    node->add_input("c");
    node->add_output("y" + std::to_string(level));
    auto* out = graph->add_output();
    out->set_name("y" + std::to_string(level));
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    onnx::AttributeProto* elseBranch = node->add_attribute();
    elseBranch->set_name("else_branch");
    elseBranch->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* leaf = elseBranch->mutable_g();
    leaf->set_name("else" + std::to_string(level));
    onnx::NodeProto* id = leaf->add_node();
    id->set_op_type("Identity");
    id->add_input("x");
    id->add_output("y" + std::to_string(level + 1));
    leaf->add_output()->set_name("y" + std::to_string(level + 1));
    onnx::AttributeProto* thenBranch = node->add_attribute();
    thenBranch->set_name("then_branch");
    thenBranch->set_type(onnx::AttributeProto::GRAPH);
    graph = thenBranch->mutable_g();
    graph->set_name("then" + std::to_string(level));
  }
  onnx::NodeProto* id = graph->add_node();
  id->set_op_type("Identity");
  id->add_input("x");
  id->add_output("y" + std::to_string(depth));
  graph->add_output()->set_name("y" + std::to_string(depth));
  return m;
}

TEST(LoaderErrors, SubgraphsNestedDeeperThanProtobufsLimitAreNamedAsSuch) {
  auto dir = tempDir("nested");
  const std::string bytes = nestedIfModel(60).SerializeAsString();
  writeBytes(dir / "m.onnx", bytes);
  expectError([&] { onnx_import::loadModel((dir / "m.onnx").string()); },
              {"m.onnx", "nest more than 100 levels deep"});
  writeBytes(dir / "deep.onnx", nestedIfModel(2000).SerializeAsString());
  expectError([&] { onnx_import::loadModel((dir / "deep.onnx").string()); },
              {"deep.onnx", "nest more than 100 levels deep"});
  expectError([&] { onnx_import::loadModelFromBytes(bytes.data(), bytes.size(), ".", "<bytes>"); },
              {"<bytes>", "nest more than 100 levels deep"});
  // Within the limit the same structure loads.
  const std::string shallow = nestedIfModel(5).SerializeAsString();
  writeBytes(dir / "shallow.onnx", shallow);
  EXPECT_NO_THROW(onnx_import::loadModel((dir / "shallow.onnx").string()));
}

TEST(LoaderErrors, WrongMagic) {
  auto dir = tempDir("magic");
  writeBytes(dir / "m.onnx", "\x89PNG\r\n\x1a\n this is an image, not a model");
  expectError([&] { onnx_import::loadModel((dir / "m.onnx").string()); },
              {"m.onnx", "not a valid ONNX model"});
}

TEST(LoaderErrors, MissingFile) {
  expectError([] { onnx_import::loadModel("/nonexistent/m.onnx"); },
              {"/nonexistent/m.onnx", "cannot open"});
}

TEST(LoaderErrors, InputThatNoOneProduces) {
  auto m = makeModel();
  addInput(m, "x", {3});
  addNode(m, "Add", {"x", "ghost"}, {"y"}, "add");
  addOutput(m, "y", {3});
  auto dir = tempDir("ghost");
  std::string path = saveModel(m, dir / "m.onnx");
  expectError([&] { onnx_import::loadModel(path); },
              {"m.onnx", "node 'add' (Add)", "'ghost'", "not produced"});
}

TEST(LoaderErrors, Cycle) {
  auto m = makeModel();
  addInput(m, "x", {3});
  addNode(m, "Add", {"x", "b"}, {"a"}, "first");
  addNode(m, "Relu", {"a"}, {"b"}, "second");
  addOutput(m, "a", {3});
  auto dir = tempDir("cycle");
  std::string path = saveModel(m, dir / "m.onnx");
  expectError([&] { onnx_import::loadModel(path); },
              {"cycle", "node 'first' (Add)", "node 'second' (Relu)"});
}

TEST(LoaderErrors, InitializerSizeDoesNotMatchShape) {
  auto m = addReluModel();
  m.mutable_graph()->mutable_initializer(0)->add_float_data(4);  // 4 values for shape [3]
  auto dir = tempDir("size");
  std::string path = saveModel(m, dir / "m.onnx");
  expectError([&] { onnx_import::loadModel(path); }, {"initializer 'b'", "4 values", "needs 3"});

  auto raw = addReluModel();
  auto* b = raw.mutable_graph()->mutable_initializer(0);
  b->clear_float_data();
  b->set_raw_data(std::string(8, '\0'));  // 8 bytes for 3 floats
  path = saveModel(raw, dir / "raw.onnx");
  expectError([&] { onnx_import::loadModel(path); },
              {"initializer 'b'", "raw_data has 8 bytes", "needs 12"});
}

TEST(LoaderErrors, ExternalDataOutsideTheModelFolder) {
  auto dir = tempDir("escape");
  std::filesystem::create_directories(dir / "model");
  writeBytes(dir / "secret.bin", std::string(12, '\0'));
  for (const std::string location : {"../secret.bin", "/etc/passwd"}) {
    auto m = addReluModel();
    auto* b = m.mutable_graph()->mutable_initializer(0);
    b->clear_float_data();
    b->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* kv = b->add_external_data();
    kv->set_key("location");
    kv->set_value(location);
    std::string path = saveModel(m, dir / "model" / "m.onnx");
    expectError([&] { onnx_import::loadModel(path); }, {"initializer 'b'", location.c_str()});
  }
}

TEST(LoaderErrors, ExternalDataPastTheEndOfItsFile) {
  auto dir = tempDir("short");
  writeBytes(dir / "w.bin", std::string(8, '\0'));
  auto m = addReluModel();
  auto* b = m.mutable_graph()->mutable_initializer(0);
  b->clear_float_data();
  b->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = b->add_external_data();
  kv->set_key("location");
  kv->set_value("w.bin");
  std::string path = saveModel(m, dir / "m.onnx");
  expectError([&] { onnx_import::loadModel(path); }, {"initializer 'b'", "past the end"});
}

TEST(SessionErrors, WrongInputShapeNamesInputIndexAndValues) {
  auto m = makeModel();
  addInput(m, "input", {1, 3, 4});
  addNode(m, "Relu", {"input"}, {"y"});
  addOutput(m, "y", {1, 3, 4});
  auto dir = tempDir("shape");
  Session s(saveModel(m, dir / "m.onnx"));
  expectError(
      [&] {
        s.run({{"input", Tensor(DataType::kFloat32, {2, 3, 4})}});
      },
      {"input 'input'", "index 0: got 2, expected 1"});
  expectError(
      [&] {
        s.run({{"input", Tensor(DataType::kFloat32, {1, 3})}});
      },
      {"input 'input'", "rank 2"});
  expectError(
      [&] {
        s.run({{"input", Tensor(DataType::kInt64, {1, 3, 4})}});
      },
      {"input 'input'", "int64", "float32"});
  expectError(
      [&] {
        s.run({{"nope", Tensor(DataType::kFloat32, {1, 3, 4})}});
      },
      {"'nope' is not an input"});
  expectError([&] { s.run({}); }, {"input 'input' is missing"});
}

TEST(SessionErrors, UnsupportedOperatorsAreAllListed) {
  auto m = makeModel();
  addInput(m, "x", {3});
  addNode(m, "FancyOp", {"x"}, {"a"}, "first");
  addNode(m, "OtherOp", {"a"}, {"y"}, "second");
  addOutput(m, "y", {3});
  auto dir = tempDir("unsupported");
  std::string path = saveModel(m, dir / "m.onnx");
  try {
    Session s(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupportedNode);
    EXPECT_THAT(e.what(), HasSubstr("2 unsupported nodes"));
    EXPECT_THAT(e.what(), HasSubstr("FancyOp"));
    EXPECT_THAT(e.what(), HasSubstr("OtherOp"));
  }
}

}  // namespace
}  // namespace kiln
