// The plugin API's parts on their own: dim expressions, typed fields (getters, byte encoding,
// JSON), the registry and loading plugin libraries.
#include <gtest/gtest.h>

#include <algorithm>

#include "kiln/plugin.h"

namespace kiln {
namespace {

TEST(PluginDimExpr, EvaluatesArithmeticOverInputDims) {
  const DimExpr h = DimExpr::inputDim(0, 2), w = DimExpr::inputDim(1, 1);
  const std::vector<Shape> shapes{{1, 3, 10}, {4, 7}};
  EXPECT_EQ((h * 2 + 1).evaluate(shapes), 21);
  EXPECT_EQ((h - w).evaluate(shapes), 3);
  EXPECT_EQ((w / 2).evaluate(shapes), 3);
  EXPECT_EQ(ceilDiv(w, 2).evaluate(shapes), 4);
  EXPECT_EQ((DimExpr(-7) / 2).evaluate(shapes), -4);  // floor division
  EXPECT_EQ(ceilDiv(DimExpr(-7), 2).evaluate(shapes), -3);
  EXPECT_EQ(max(h, w).evaluate(shapes), 10);
  EXPECT_EQ(min(h, w).evaluate(shapes), 7);
  EXPECT_EQ((h / 0).evaluate(shapes), std::nullopt);
  EXPECT_EQ(DimExpr::inputDim(0, 5).evaluate(shapes), std::nullopt);  // no such axis
  EXPECT_EQ((h + 1).evaluate({{1, 3, -1}, {4, 7}}), std::nullopt);    // unknown dim
  EXPECT_EQ((h * 2 + 1).toString(), "((in0[2] * 2) + 1)");
  EXPECT_EQ(ceilDiv(w, 3).toString(), "ceilDiv(in1[1], 3)");
}

TEST(PluginFields, TypedGettersNameTheFieldAndBothTypes) {
  PluginFields f;
  f.set("alpha", 0.5f)
      .set("n", int64_t{3})
      .set("mode", std::string("fast"))
      .set("sizes", std::vector<int64_t>{1, 2});
  EXPECT_FLOAT_EQ(f.getFloat("alpha"), 0.5f);
  EXPECT_FLOAT_EQ(f.getFloat("n"), 3.0f);  // an int where a float is asked for
  EXPECT_EQ(f.getFloats("sizes"), (std::vector<float>{1, 2}));
  EXPECT_EQ(f.getInt("missing", 7), 7);
  try {
    f.getInt("mode");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "plugin field 'mode' expects type int, given string");
  }
  EXPECT_THROW(f.getString("absent"), Error);
}

TEST(PluginFields, SerializeRoundTripsEveryType) {
  PluginFields f;
  f.set("i", int64_t{-5})
      .set("f", 2.5f)
      .set("s", std::string("text"))
      .set("is", std::vector<int64_t>{1, -2, 3});
  f.set("fs", std::vector<float>{0.25f}).set("ss", std::vector<std::string>{"a", "", "c"});
  f.set("t", Tensor::fromVector<float>(DataType::kFloat32, {2}, {1.5f, -1.5f}));
  std::vector<uint8_t> bytes = f.serialize();
  PluginFields g = PluginFields::deserialize(bytes.data(), bytes.size());
  EXPECT_EQ(g.getInt("i"), -5);
  EXPECT_FLOAT_EQ(g.getFloat("f"), 2.5f);
  EXPECT_EQ(g.getString("s"), "text");
  EXPECT_EQ(g.getInts("is"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(g.getFloats("fs"), (std::vector<float>{0.25f}));
  EXPECT_EQ(g.getStrings("ss"), (std::vector<std::string>{"a", "", "c"}));
  EXPECT_EQ(g.getTensor("t").shape(), (Shape{2}));
  EXPECT_FLOAT_EQ(g.getTensor("t").data<float>()[1], -1.5f);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {  // every truncation is an error, never a crash
    EXPECT_THROW(PluginFields::deserialize(bytes.data(), cut), Error) << "cut at " << cut;
  }
}

TEST(PluginFields, FromJson) {
  PluginFields f = PluginFields::fromJson(R"({"lo": -1, "hi": 0.5, "name": "x", "axes": [1, 2],
                                              "scales": [1, 0.5], "tags": ["a"], "on": true})");
  EXPECT_EQ(f.type("lo"), PluginFieldType::kINT);
  EXPECT_EQ(f.type("hi"), PluginFieldType::kFLOAT);
  EXPECT_EQ(f.getString("name"), "x");
  EXPECT_EQ(f.getInts("axes"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(f.getFloats("scales"), (std::vector<float>{1, 0.5f}));
  EXPECT_EQ(f.getStrings("tags"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(f.getInt("on"), 1);
  EXPECT_THROW(PluginFields::fromJson("{\"x\": {\"nested\": 1}}"), Error);
  EXPECT_THROW(PluginFields::fromJson("[1, 2]"), Error);
  EXPECT_THROW(PluginFields::fromJson("{not json"), Error);
}

class NamedCreator : public IPluginCreator {
 public:
  NamedCreator(std::string name, std::string version)
      : name_(std::move(name)), version_(std::move(version)) {}
  std::string getPluginName() const override { return name_; }
  std::string getPluginVersion() const override { return version_; }
  std::string getPluginNamespace() const override { return "unit.test"; }
  std::unique_ptr<IPlugin> createPlugin(const std::string&, const PluginFields&) const override {
    return nullptr;
  }
  std::unique_ptr<IPlugin> deserializePlugin(const std::string&, const void*,
                                             size_t) const override {
    return nullptr;
  }

 private:
  std::string name_, version_;
};

TEST(PluginRegistry, RegistersFindsAndRemovesCreators) {
  PluginRegistry& r = PluginRegistry::global();
  ASSERT_TRUE(r.registerCreator(std::make_shared<NamedCreator>("RegistryProbe", "1")).ok());
  ASSERT_TRUE(r.registerCreator(std::make_shared<NamedCreator>("RegistryProbe", "10")).ok());
  ASSERT_TRUE(r.registerCreator(std::make_shared<NamedCreator>("RegistryProbe", "9")).ok());
  Status dup = r.registerCreator(std::make_shared<NamedCreator>("RegistryProbe", "9"));
  EXPECT_EQ(dup.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(
      dup.message().find(
          "plugin 'RegistryProbe' (version '9', namespace 'unit.test') is already registered"),
      std::string::npos);
  EXPECT_EQ(r.getCreator("RegistryProbe", "", "unit.test")->getPluginVersion(),
            "10");  // the highest
  EXPECT_EQ(r.getCreator("RegistryProbe", "9", "unit.test")->getPluginVersion(), "9");
  EXPECT_EQ(r.getCreator("RegistryProbe", "9", "other"), nullptr);
  EXPECT_TRUE(r.hasPlugin("RegistryProbe", "unit.test"));
  for (const char* v : {"1", "10", "9"})
    EXPECT_TRUE(r.deregisterCreator("RegistryProbe", v, "unit.test"));
  EXPECT_FALSE(r.deregisterCreator("RegistryProbe", "1", "unit.test"));
  EXPECT_FALSE(r.hasPlugin("RegistryProbe", "unit.test"));
}

TEST(PluginRegistry, LoadPluginLibraryNamesThePathAndTheReason) {
  Status missing = loadPluginLibrary("/nonexistent/libnothing.so");
  EXPECT_EQ(missing.code(), ErrorCode::kIoError);
  EXPECT_NE(missing.message().find("/nonexistent/libnothing.so: cannot load the plugin library"),
            std::string::npos);
  Status notElf = loadPluginLibrary(KILN_SOURCE_DIR "/CMakeLists.txt");  // dlerror's reason
  EXPECT_EQ(notElf.code(), ErrorCode::kIoError);
  EXPECT_NE(notElf.message().find("CMakeLists.txt: cannot load the plugin library: "),
            std::string::npos);
  EXPECT_NE(notElf.message().find("header"), std::string::npos)
      << notElf.message();  // "invalid ELF header"

  ASSERT_TRUE(loadPluginLibrary(KILN_TEST_PLUGIN_LIBRARY).ok());
  ASSERT_TRUE(loadPluginLibrary(KILN_TEST_PLUGIN_LIBRARY).ok());  // twice: a no-op
  EXPECT_NE(PluginRegistry::global().getCreator("ScaleCrop", "2", "kiln.test"), nullptr);
  EXPECT_NE(PluginRegistry::global().getCreator("TestClamp"), nullptr);
  auto libs = PluginRegistry::global().getLoadedLibraries();
  EXPECT_EQ(std::count_if(libs.begin(), libs.end(),
                          [](const std::string& l) {
                            return l.find("libkiln_test_plugins.so") != std::string::npos;
                          }),
            1);
}

}  // namespace
}  // namespace kiln
