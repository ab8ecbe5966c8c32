// Plugins end to end, with the plugins of libkiln_test_plugins.so: ONNX import (full path and the
// simple `Plugin` node), Session, build -> plan -> load -> run, the network API, concurrent
// contexts, and the error cases of issue 6.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "engine_test_support.h"
#include "kiln/onnx_parser.h"
#include "kiln/plugin.h"
#include "kiln/session.h"
#include "model_builder.h"
#include "onnx/loader.h"

namespace kiln {
namespace {

using testing::RecordingLogger;

void loadTestPlugins() { ASSERT_TRUE(loadPluginLibrary(KILN_TEST_PLUGIN_LIBRARY).ok()); }

onnx::AttributeProto* addAttr(onnx::NodeProto* node, const std::string& name) {
  auto* a = node->add_attribute();
  a->set_name(name);
  return a;
}

// x [N, 4] -> kiln.test::ScaleCrop(x, bias) -> y [N, 4], crop [N, ceil(4 / 3) = 2].
onnx::ModelProto scaleCropModel(bool alphaAsString = false) {
  auto m = testing::makeModel(17);
  auto* op = m.add_opset_import();
  op->set_domain("kiln.test");
  op->set_version(1);
  testing::addInput(m, "x", {-1, 4});
  testing::addFloatInitializer(m, "bias", {4}, {0.5f, -0.5f, 1.0f, 0.0f});
  testing::addNode(m, "ScaleCrop", {"x", "bias"}, {"y", "crop"}, "scale_crop");
  auto* node = m.mutable_graph()->mutable_node(0);
  node->set_domain("kiln.test");
  auto* alpha = addAttr(node, "alpha");
  if (alphaAsString) {
    alpha->set_type(onnx::AttributeProto::STRING);
    alpha->set_s("two");
  } else {
    alpha->set_type(onnx::AttributeProto::FLOAT);
    alpha->set_f(2.0f);
  }
  auto* div = addAttr(node, "crop_divisor");
  div->set_type(onnx::AttributeProto::INT);
  div->set_i(3);
  auto* version = addAttr(node, "plugin_version");
  version->set_type(onnx::AttributeProto::STRING);
  version->set_s("2");
  auto* names = addAttr(node, "names");
  names->set_type(onnx::AttributeProto::STRINGS);
  names->add_strings("a");
  testing::addOutput(m, "y", {-1, 4});
  testing::addOutput(m, "crop", {-1, -1});
  return m;
}

// y = 2 x + bias; crop = its first 2 columns.
void expectScaleCrop(const Tensor& x, const Tensor& y, const Tensor& crop) {
  const float bias[4] = {0.5f, -0.5f, 1.0f, 0.0f};
  const int64_t n = x.dim(0);
  ASSERT_EQ(y.shape(), (Shape{n, 4}));
  ASSERT_EQ(crop.shape(), (Shape{n, 2}));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < 4; ++c) {
      const float want = 2.0f * x.data<float>()[r * 4 + c] + bias[c];
      EXPECT_FLOAT_EQ(y.data<float>()[r * 4 + c], want);
      if (c < 2) EXPECT_FLOAT_EQ(crop.data<float>()[r * 2 + c], want);
    }
  }
}

Tensor rows(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n * 4));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.25f - 1.0f;
  return Tensor::fromVector<float>(DataType::kFloat32, {n, 4}, v);
}

std::string saveToTemp(const onnx::ModelProto& m, const std::string& name) {
  return testing::saveModel(m, testing::tempDir(name) / "model.onnx");
}

TEST(PluginModel, SessionRunsAFullPathPluginFromOnnx) {
  loadTestPlugins();
  Session session(saveToTemp(scaleCropModel(), "plugin_session"));
  for (int64_t n : {1, 3}) {  // a dynamic batch: the dim expressions are evaluated per run
    Tensor x = rows(n);
    auto out = session.run({{"x", x}});
    expectScaleCrop(x, out[0].second, out[1].second);
  }
}

std::vector<uint8_t> buildPlan(const std::string& modelPath, RecordingLogger& logger) {
  auto builder = createBuilder(logger);
  auto network = builder->createNetwork();
  OnnxParser parser(*network, logger);
  Status parsed = parser.parseFromFile(modelPath);
  EXPECT_TRUE(parsed.ok()) << parsed.toString();
  BuilderConfig config;
  OptimizationProfile profile;
  profile.setDimensions("x", OptProfileSelector::kMIN, {1, 4});
  profile.setDimensions("x", OptProfileSelector::kOPT, {2, 4});
  profile.setDimensions("x", OptProfileSelector::kMAX, {8, 4});
  config.addOptimizationProfile(profile);
  auto plan = builder->buildSerializedNetwork(*network, config);
  EXPECT_TRUE(plan.ok()) << plan.status().toString();
  return plan.ok() ? *plan : std::vector<uint8_t>{};
}

TEST(PluginModel, PlanRoundTripRecreatesThePluginAndRunsOnManyThreads) {
  loadTestPlugins();
  RecordingLogger logger;
  std::vector<uint8_t> plan = buildPlan(saveToTemp(scaleCropModel(), "plugin_plan"), logger);
  ASSERT_FALSE(plan.empty());
  auto engine = Runtime(logger).deserializeEngine(plan.data(), plan.size());
  ASSERT_TRUE(engine.ok()) << engine.status().toString();
  // Contexts on four threads at once, each with its own batch size (a clone of the plugin each).
  std::vector<std::thread> threads;
  for (int64_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto context = (*engine)->createExecutionContext();
      ASSERT_TRUE(context.ok());
      for (int64_t n : {t + 1, 8 - t, t + 1}) {
        Tensor x = rows(n);
        auto out = testing::runContext(**context, **engine, {{"x", x}});
        expectScaleCrop(x, out["y"], out["crop"]);
      }
    });
  }
  for (auto& th : threads) th.join();
}

TEST(PluginModel, SimplePluginNodeWithJsonInfo) {
  loadTestPlugins();
  auto m = testing::makeModel(17);
  testing::addInput(m, "x", {5});
  testing::addNode(m, "Plugin", {"x"}, {"y"}, "clamp");
  auto* node = m.mutable_graph()->mutable_node(0);
  auto* name = addAttr(node, "name");
  name->set_type(onnx::AttributeProto::STRING);
  name->set_s("TestClamp");
  auto* info = addAttr(node, "info");
  info->set_type(onnx::AttributeProto::STRING);
  info->set_s(R"({"lo": -0.5, "hi": 2})");
  testing::addOutput(m, "y", {5});
  const std::string path = saveToTemp(m, "plugin_simple");
  Tensor x = Tensor::fromVector<float>(DataType::kFloat32, {5}, {-3, -0.25f, 0, 1.5f, 7});
  const std::vector<float> want{-0.5f, -0.25f, 0, 1.5f, 2};
  EXPECT_EQ(testing::values(Session(path).run({{"x", x}})[0].second), want);

  RecordingLogger logger;  // and through a plan
  auto builder = createBuilder(logger);
  auto network = builder->createNetwork();
  ASSERT_TRUE(OnnxParser(*network, logger).parseFromFile(path).ok());
  auto engine = testing::buildEngine(logger, *network);
  ASSERT_TRUE(engine);
  auto context = engine->createExecutionContext();
  EXPECT_EQ(testing::values(testing::runContext(**context, *engine, {{"x", x}})["y"]), want);
}

TEST(PluginModel, NetworkAddPluginWithFields) {
  loadTestPlugins();
  RecordingLogger logger;
  auto builder = createBuilder(logger);
  auto network = builder->createNetwork();
  ITensor* x = network->addInput("x", DataType::kFloat32, {2, 4});
  const std::vector<float> bias{0.5f, -0.5f, 1.0f, 0.0f};
  ILayer* b = network->addConstant({4}, testing::floatWeights(bias));
  PluginFields fields;
  fields.set("alpha", int64_t{2})
      .set("crop_divisor", int64_t{3});  // an int for a float field is accepted
  ILayer* layer = network->addPlugin({x, b->getOutput(0)}, "ScaleCrop", fields, "2", "kiln.test");
  ASSERT_NE(layer, nullptr) << logger.text();
  EXPECT_EQ(layer->getNbOutputs(), 2);
  EXPECT_EQ(layer->getOutput(1)->getDimensions(), (Shape{2, 2}));
  ASSERT_TRUE(network->markOutput(*layer->getOutput(0)).ok());
  ASSERT_TRUE(network->markOutput(*layer->getOutput(1)).ok());
  auto engine = testing::buildEngine(logger, *network);
  ASSERT_TRUE(engine);
  auto context = engine->createExecutionContext();
  Tensor in = rows(2);
  auto out = testing::runContext(**context, *engine, {{"x", in}});
  expectScaleCrop(in, out[layer->getOutput(0)->getName()], out[layer->getOutput(1)->getName()]);

  PluginFields bad;
  bad.set("alpha", std::string("two"));
  EXPECT_EQ(network->addPlugin({x, b->getOutput(0)}, "ScaleCrop", bad, "2", "kiln.test"), nullptr);
  EXPECT_NE(logger.text().find("field 'alpha' expects type float, given string"), std::string::npos)
      << logger.text();
}

// ---- the error cases of issue 6

TEST(PluginErrors, MissingPluginAtParseListsOpDomainVersionAndLibraries) {
  loadTestPlugins();
  auto m = scaleCropModel();
  auto* node = m.mutable_graph()->mutable_node(0);
  node->set_op_type("NoSuchPlugin");
  testing::addNode(m, "AlsoMissing", {"x"}, {"z"}, "second");  // reported in the same pass
  testing::addOutput(m, "z", {-1, 4});
  RecordingLogger logger;
  auto builder = createBuilder(logger);
  auto network = builder->createNetwork();
  OnnxParser parser(*network, logger);
  Status s = parser.parseFromFile(saveToTemp(m, "plugin_missing_parse"));
  EXPECT_EQ(s.code(), ErrorCode::kUnsupportedNode);
  ASSERT_EQ(parser.getNbErrors(), 2);
  const std::string first = parser.getError(0).toString();
  EXPECT_NE(first.find("kiln.test::NoSuchPlugin"), std::string::npos) << first;
  EXPECT_NE(
      first.find("no plugin 'NoSuchPlugin' (version '2', namespace 'kiln.test') is registered"),
      std::string::npos)
      << first;
  EXPECT_NE(first.find("plugin libraries searched: "), std::string::npos) << first;
  EXPECT_NE(first.find("libkiln_test_plugins.so"), std::string::npos) << first;
  EXPECT_NE(
      parser.getError(1).toString().find("no plugin 'AlsoMissing' (version any, namespace '')"),
      std::string::npos)
      << parser.getError(1).toString();
}

TEST(PluginErrors, FieldOfTheWrongTypeNamesNodeFieldAndTypes) {
  loadTestPlugins();
  try {
    Session session(saveToTemp(scaleCropModel(true), "plugin_bad_field"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "node 'scale_crop' (kiln.test::ScaleCrop): plugin 'ScaleCrop' field 'alpha' "
                  "expects type float, given string"),
              std::string::npos)
        << e.what();
  }
}

TEST(PluginErrors, EnqueueFailureNamesNodeAndPlugin) {
  loadTestPlugins();
  auto m = testing::makeModel(17);
  auto* op = m.add_opset_import();
  op->set_domain("kiln.test");
  op->set_version(1);
  testing::addInput(m, "x", {3});
  testing::addNode(m, "AlwaysFails", {"x"}, {"y"}, "doomed");
  m.mutable_graph()->mutable_node(0)->set_domain("kiln.test");
  testing::addOutput(m, "y", {3});
  Session session(saveToTemp(m, "plugin_enqueue_fails"));
  try {
    session.run({{"x", Tensor(DataType::kFloat32, {3})}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRuntimeError);
    EXPECT_NE(std::string(e.what()).find(
                  "node 'doomed' (kiln.test::AlwaysFails): plugin 'AlwaysFails' (version '1', "
                  "namespace 'kiln.test') enqueue failed: RUNTIME_ERROR: AlwaysFails refuses"),
              std::string::npos)
        << e.what();
  }
}

// A plugin registered only while the plan is built, as when the library is not loaded at run time.
struct Doubler : SimplePlugin<Doubler> {
  Status run(const std::vector<const Tensor*>& in, Tensor& out) override {
    for (int64_t i = 0; i < out.numel(); ++i) out.data<float>()[i] = 2 * in[0]->data<float>()[i];
    return Status();
  }
};

TEST(PluginErrors, MissingPluginAtPlanLoadNamesIt) {
  ASSERT_TRUE(
      PluginRegistry::global()
          .registerCreator(std::make_shared<SimplePluginCreator<Doubler>>("Doubler", "3", "unit"))
          .ok());
  RecordingLogger logger;
  auto builder = createBuilder(logger);
  auto network = builder->createNetwork();
  ITensor* x = network->addInput("x", DataType::kFloat32, {2});
  ILayer* layer = network->addPlugin({x}, "Doubler", PluginFields(), "3", "unit");
  ASSERT_NE(layer, nullptr) << logger.text();
  ASSERT_TRUE(network->markOutput(*layer->getOutput(0)).ok());
  auto plan = builder->buildSerializedNetwork(*network, BuilderConfig());
  ASSERT_TRUE(plan.ok()) << plan.status().toString();
  auto engine = Runtime(logger).deserializeEngine(plan->data(), plan->size());  // registered: loads
  ASSERT_TRUE(engine.ok()) << engine.status().toString();
  auto context = (*engine)->createExecutionContext();
  Tensor in = Tensor::fromVector<float>(DataType::kFloat32, {2}, {1.5f, -2});
  EXPECT_EQ(testing::values(testing::runContext(**context, **engine,
                                                {{"x", in}})[layer->getOutput(0)->getName()]),
            (std::vector<float>{3, -4}));

  ASSERT_TRUE(PluginRegistry::global().deregisterCreator("Doubler", "3", "unit"));
  auto missing = Runtime(logger).deserializeEngine(plan->data(), plan->size());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kUnsupportedNode);
  EXPECT_NE(missing.status().message().find(
                "the plan needs plugin 'Doubler' (version '3', namespace 'unit') for "
                "node '"),
            std::string::npos)
      << missing.status().message();
  EXPECT_NE(missing.status().message().find("which is not registered; plugin libraries searched:"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// The built-in MYSELU example as a torch symbolic() exports it: its string, ints and float
// attributes reach the plugin's fields (read back from the bytes it puts in a plan).
TEST(PluginExamples, MyseluAttributesReachItsFields) {
  auto m = testing::makeModel(17);
  testing::addInput(m, "x", {2, 3});
  testing::addFloatInitializer(m, "p", {1}, {0.5f});
  testing::addFloatInitializer(m, "c", {3}, {3, 2, 1});
  testing::addNode(m, "MYSELU", {"x", "p", "c"}, {"y"}, "myselu");
  auto* node = m.mutable_graph()->mutable_node(0);
  auto* s = addAttr(node, "attr1");
  s->set_type(onnx::AttributeProto::STRING);
  s->set_s("this is a string attribute");
  auto* i = addAttr(node, "attr2");
  i->set_type(onnx::AttributeProto::INTS);
  for (int v : {1, 2, 3}) i->add_ints(v);
  auto* f = addAttr(node, "attr3");
  f->set_type(onnx::AttributeProto::FLOAT);
  f->set_f(222.0f);
  testing::addOutput(m, "y", {2, 3});
  const std::string path = saveToTemp(m, "plugin_myselu");
  ir::Model model = onnx_import::loadModel(path);
  ASSERT_TRUE(model.graph.nodes[0].plugin);
  std::vector<uint8_t> bytes = model.graph.nodes[0].plugin->serialize();
  PluginFields fields = PluginFields::deserialize(bytes.data(), bytes.size());
  EXPECT_EQ(fields.getString("attr1"), "this is a string attribute");
  EXPECT_EQ(fields.getInts("attr2"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_FLOAT_EQ(fields.getFloat("attr3"), 222.0f);
  Tensor x = Tensor::fromVector<float>(DataType::kFloat32, {2, 3}, {-4, -1, 0, 0.5f, 2, 30});
  Tensor y = Session(path).run({{"x", x}})[0].second;
  for (int64_t k = 0; k < 6; ++k) {
    const float v = x.data<float>()[k];
    EXPECT_NEAR(y.data<float>()[k], v / (1 + std::exp(-v)), 1e-5f * (1 + std::fabs(v)));
  }
}

}  // namespace
}  // namespace kiln
