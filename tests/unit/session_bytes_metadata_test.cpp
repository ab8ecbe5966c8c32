// Session from model bytes (with external data looked up in a given folder) and the model
// metadata a Session reports; both serve the Python InferenceSession.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/session.h"
#include "model_builder.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace kiln::testing;

onnx::ModelProto describedModel() {
  auto m = makeModel();
  m.set_producer_name("exporter");
  m.set_producer_version("2.5");
  m.set_domain("org.example");
  m.set_doc_string("adds one");
  m.set_model_version(7);
  m.mutable_graph()->set_name("adder");
  m.mutable_graph()->set_doc_string("the graph");
  auto* kv = m.add_metadata_props();
  kv->set_key("labels");
  kv->set_value("cat,dog");
  addInput(m, "x", {2});
  addFloatInitializer(m, "one", {2}, {1, 1});
  addNode(m, "Add", {"x", "one"}, {"y"}, "add");
  addOutput(m, "y", {2});
  return m;
}

std::vector<float> runOnTwo(const Session& s) {
  auto out = s.run({{"x", Tensor::fromVector<float>(DataType::kFloat32, {2}, {1, 2})}});
  const Tensor& y = out.at(0).second;
  return {y.data<float>()[0], y.data<float>()[1]};
}

TEST(SessionFromBytes, RunsLikeTheFile) {
  std::string bytes = describedModel().SerializeAsString();
  Session s(bytes.data(), bytes.size());
  bytes.assign(bytes.size(), '\0');  // the session must not need the bytes any more
  EXPECT_THAT(runOnTwo(s), ElementsAre(2, 3));
  ASSERT_EQ(s.inputs().size(), 1u);
  EXPECT_EQ(s.inputs()[0].name, "x");
}

TEST(SessionFromBytes, ReadsExternalDataFromTheGivenFolder) {
  auto dir = tempDir("bytes_external");
  auto m = makeModel();
  addInput(m, "x", {2});
  auto* w = m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = w->add_external_data();
  kv->set_key("location");
  kv->set_value("w.bin");
  float values[2] = {10, 20};
  writeBytes(dir / "w.bin", std::string(reinterpret_cast<char*>(values), sizeof(values)));
  addNode(m, "Add", {"x", "w"}, {"y"});
  addOutput(m, "y", {2});
  const std::string bytes = m.SerializeAsString();
  Session s(bytes.data(), bytes.size(), {}, dir.string());
  EXPECT_THAT(runOnTwo(s), ElementsAre(11, 22));
  try {
    Session elsewhere(bytes.data(), bytes.size());  // w.bin is not in the current folder
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("<memory>"));
    EXPECT_THAT(e.what(), HasSubstr("w.bin"));
  }
}

TEST(SessionFromBytes, GarbageIsAnInvalidModel) {
  const std::string bytes = "\x01\x02 this is not a protobuf";
  try {
    Session s(bytes.data(), bytes.size());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
    EXPECT_THAT(e.what(), HasSubstr("<memory>: not a valid ONNX model"));
  }
}

TEST(SessionMetadata, ReportsTheModelsDescriptiveFields) {
  auto dir = tempDir("metadata");
  Session fromFile(saveModel(describedModel(), dir / "m.onnx"));
  const std::string bytes = describedModel().SerializeAsString();
  Session fromBytes(bytes.data(), bytes.size());
  for (const Session* s : {&fromFile, &fromBytes}) {
    const ModelMetadata& meta = s->metadata();
    EXPECT_EQ(meta.producerName, "exporter");
    EXPECT_EQ(meta.producerVersion, "2.5");
    EXPECT_EQ(meta.domain, "org.example");
    EXPECT_EQ(meta.description, "adds one");
    EXPECT_EQ(meta.version, std::optional<int64_t>(7));
    EXPECT_EQ(meta.graphName, "adder");
    EXPECT_EQ(meta.graphDescription, "the graph");
    EXPECT_EQ(meta.custom, (std::map<std::string, std::string>{{"labels", "cat,dog"}}));
  }
}

TEST(SessionMetadata, AModelWithoutAVersionSaysSo) {
  const std::string bytes = makeModel().SerializeAsString();
  EXPECT_FALSE(Session(bytes.data(), bytes.size()).metadata().version.has_value());
}

}  // namespace
}  // namespace kiln
