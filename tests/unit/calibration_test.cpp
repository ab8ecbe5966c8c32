// INT8 calibration: the calibrators' thresholds on hand-computed histograms, the calibration
// cache, the quantization plan, and a kINT8 build with calibrators good and bad.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "build/calibration_cache.h"
#include "build/calibration_stats.h"
#include "build/quantization_plan.h"
#include "engine_test_support.h"
#include "graph_loading.h"
#include "ir/precision.h"
#include "kiln/calibrator.h"
#include "kiln/onnx_parser.h"

namespace kiln {
namespace {

using build::ActivationRange;
using build::TensorStatistics;

TEST(EntropyCalibration, ThresholdOfLeastDivergenceOnAHandComputedHistogram) {
  // Four bins of width 1, two levels; bin 0 is counted as bin 1 (4), so [9, 4, 1, 3] is read as
  // [4, 4, 1, 3]. Candidates i = 2, 3, 4 (P: the first i bins, the rest added to bin i-1; Q: the
  // first i bins merged into 2 groups, spread over their non-empty bins):
  //   i=2: P=[4,8]/12    Q=[4,4]/8         KL = 1/3 ln(2/3) + 2/3 ln(4/3)              = 0.0566
  //   i=3: P=[4,4,4]/12  Q=[4,2.5,2.5]/9   KL = 1/3 ln(3/4) + 2/3 ln(6/5)              = 0.0256
  //   i=4: P=[4,4,1,3]/12 Q=[4,4,2,2]/12   KL = 1/12 ln(1/2) + 3/12 ln(3/2)            = 0.0436
  // i = 3 wins: the threshold is its upper edge, 3 bins.
  EXPECT_DOUBLE_EQ(build::entropyThreshold({9, 4, 1, 3}, 1.0, 2), 3.0);
  EXPECT_DOUBLE_EQ(build::entropyThreshold({4, 4, 1, 3}, 0.25, 2), 0.75);
}

TEST(EntropyCalibration, ThresholdEndsWhereTheDataEnds) {
  // Equal counts in the first 200 of 2048 bins and none beyond: every i >= 200 reproduces P
  // exactly (KL 0), every i < 200 folds mass into bin i-1; the smallest i of KL 0 is 200.
  std::vector<double> histogram(build::kHistogramBins, 0.0);
  for (int k = 0; k < 200; ++k) histogram[static_cast<size_t>(k)] = 10;
  EXPECT_DOUBLE_EQ(build::entropyThreshold(histogram, 0.5), 200 * 0.5);
}

TEST(EntropyCalibration, ClipsALongTail) {
  // |x| of a Laplace distribution (scale 1) up to its largest sample: the threshold cuts the tail.
  std::mt19937 rng(7);
  std::exponential_distribution<float> exponential(1.0f);
  std::vector<float> x(200000);
  for (float& v : x) v = exponential(rng) * (rng() % 2 ? 1.0f : -1.0f);
  TensorStatistics stats;
  stats.observeRange(x.data(), static_cast<int64_t>(x.size()));
  stats.startHistogram();
  stats.observeHistogram(x.data(), static_cast<int64_t>(x.size()));
  const ActivationRange range =
      build::chooseRange(stats, CalibrationAlgoType::kENTROPY_CALIBRATION_2, 0);
  EXPECT_TRUE(range.symmetric);
  EXPECT_LT(range.max, 0.9 * stats.absMax());  // the sparse end of the tail saturates
  EXPECT_GT(range.max, 3.0);                   // keeps the bulk: P(|x| > 3) = 5 %
  EXPECT_EQ(range.min, -range.max);
}

TEST(EntropyCalibration, ANonNegativeTensorGetsAllLevelsOnZeroToThreshold) {
  std::vector<float> x(4096);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(i % 64) / 8;  // uniform over [0, 7.875]
  TensorStatistics stats;
  stats.observeRange(x.data(), static_cast<int64_t>(x.size()));
  stats.startHistogram();
  stats.observeHistogram(x.data(), static_cast<int64_t>(x.size()));
  const ActivationRange range =
      build::chooseRange(stats, CalibrationAlgoType::kENTROPY_CALIBRATION_2, 0);
  EXPECT_FALSE(range.symmetric);
  EXPECT_EQ(range.min, 0);
  EXPECT_DOUBLE_EQ(range.max, 7.875);  // the data ends at the last bin: nothing to clip
  const build::Int8Params p = build::int8Params(range);
  EXPECT_FLOAT_EQ(p.scale, 7.875f / 255);
  EXPECT_EQ(p.zeroPoint, -128);
}

TEST(PercentileCalibration, UpperEdgeOfTheBinWhereTheShareIsReached) {
  const std::vector<double> histogram = {50, 30, 15, 4,
                                         1};  // cumulative 50, 80, 95, 99, 100 of 100
  EXPECT_DOUBLE_EQ(build::percentileThreshold(histogram, 2.0, 95), 6.0);
  EXPECT_DOUBLE_EQ(build::percentileThreshold(histogram, 2.0, 99), 8.0);
  EXPECT_DOUBLE_EQ(build::percentileThreshold(histogram, 2.0, 99.99), 10.0);
  EXPECT_DOUBLE_EQ(build::percentileThreshold(histogram, 2.0, 40), 2.0);
  try {
    build::percentileThreshold(histogram, 2.0, 0);
    FAIL() << "percentile 0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("percentile must be in (0, 100]"), std::string::npos)
        << e.what();
  }
}

TEST(TensorStatistics, HistogramOfAbsoluteValues) {
  const std::vector<float> x = {0, -1, 2, -3, 4, NAN};
  TensorStatistics stats;
  stats.observeRange(x.data(), 6);
  EXPECT_EQ(stats.min(), -3);
  EXPECT_EQ(stats.max(), 4);
  stats.startHistogram(4);
  stats.observeHistogram(x.data(), 6);
  EXPECT_EQ(stats.binWidth(), 1.0);
  EXPECT_EQ(stats.histogram(),
            (std::vector<double>{1, 1, 1, 2}));  // 4 lands in the last bin; NaN nowhere
}

TEST(MinMaxCalibration, AsymmetricRangeHoldingZero) {
  const std::vector<float> x = {-1, 0.5f, 3};
  TensorStatistics stats;
  stats.observeRange(x.data(), 3);
  const ActivationRange range =
      build::chooseRange(stats, CalibrationAlgoType::kMINMAX_CALIBRATION, 0);
  EXPECT_EQ(range.min, -1);
  EXPECT_EQ(range.max, 3);
  const build::Int8Params p = build::int8Params(range);
  EXPECT_FLOAT_EQ(p.scale, 4.0f / 255);
  EXPECT_EQ(p.zeroPoint, -64);  // round(-128 + 1 / (4/255)) = round(-64.25)
  const std::vector<float> positive = {0.5f, 2};
  TensorStatistics pos;
  pos.observeRange(positive.data(), 2);
  const build::Int8Params q =
      build::int8Params(build::chooseRange(pos, CalibrationAlgoType::kMINMAX_CALIBRATION, 0));
  EXPECT_FLOAT_EQ(q.scale, 2.0f / 255);
  EXPECT_EQ(q.zeroPoint, -128);  // the range widened to [0, 2]
}

TEST(Int8Params, SymmetricAndEmptyRanges) {
  const build::Int8Params s = build::int8Params({-2.54, 2.54, true});
  EXPECT_FLOAT_EQ(s.scale, 0.02f);
  EXPECT_EQ(s.zeroPoint, 0);
  const build::Int8Params zero = build::int8Params({0, 0, false});
  EXPECT_EQ(zero.scale, 1.0f);
  EXPECT_EQ(zero.zeroPoint, 0);
}

// x[1,2,4,4] -> Conv(2->3, 3x3, pad 1) -> Relu -> Conv(3->2, 1x1) -> y; optional pin of conv2 to
// fp32.
onnx::ModelProto convNet(bool pinSecondToFp32 = false) {
  onnx::ModelProto model = testing::makeModel(13);
  testing::addInput(model, "x", {1, 2, 4, 4});
  std::vector<float> w1(3 * 2 * 9), w2(2 * 3);
  for (size_t i = 0; i < w1.size(); ++i) w1[i] = std::sin(0.7f * static_cast<float>(i)) * 0.5f;
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = std::cos(1.3f * static_cast<float>(i));
  testing::addFloatInitializer(model, "w1", {3, 2, 3, 3}, w1);
  testing::addFloatInitializer(model, "b1", {3}, {0.1f, -0.2f, 0.05f});
  testing::addFloatInitializer(model, "w2", {2, 3, 1, 1}, w2);
  testing::addNode(model, "Conv", {"x", "w1", "b1"}, {"c1"}, "conv1");
  testing::setInts(testing::lastNode(model), "pads", {1, 1, 1, 1});
  testing::addNode(model, "Relu", {"c1"}, {"r1"}, "relu1");
  testing::addNode(model, "Conv", {"r1", "w2"}, {"y"}, "conv2");
  if (pinSecondToFp32) {
    auto* a = testing::lastNode(model)->add_attribute();
    a->set_name(ir::kPrecisionAttr);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(ir::kPrecisionFp32);
  }
  testing::addOutput(model, "y", {1, 2, 4, 4});
  return model;
}

std::vector<std::string> activationNames(const ir::Graph& g, const build::QuantizationTargets& t) {
  std::vector<std::string> names;
  for (int id : t.activations) names.push_back(g.value(id).name);
  return names;
}

TEST(QuantizationPlan, ActivationsAroundTheQuantizedLayers) {
  const ir::Graph g = testing::loadInferredGraph(convNet(), "qplan");
  const build::QuantizationTargets t = build::findQuantizationTargets(g, {});
  ASSERT_EQ(t.nodes.size(), 2u);
  // conv1's input, the Relu's output (conv1's only reader) read by conv2; y is read by nobody.
  EXPECT_EQ(activationNames(g, t), (std::vector<std::string>{"x", "r1"}));
  const ir::Graph pinned = testing::loadInferredGraph(convNet(true), "qplan_pinned");
  const build::QuantizationTargets p = build::findQuantizationTargets(pinned, {});
  ASSERT_EQ(p.nodes.size(), 1u);
  ASSERT_EQ(p.skipped.size(), 1u);
  EXPECT_EQ(p.skipped[0], "node 'conv2' (Conv): pinned to fp32");
  build::QuantizeOptions exclude;
  exclude.excludeNodes = {"conv1"};
  EXPECT_EQ(build::findQuantizationTargets(g, exclude).skipped[0], "node 'conv1' (Conv): excluded");
}

TEST(QuantizationPlan, WeightsPerChannelSymmetric) {
  ir::Graph g = testing::loadInferredGraph(convNet(), "qplan_weights");
  const build::QuantizationTargets t = build::findQuantizationTargets(g, {});
  const build::QuantizationPlan plan =
      build::makeQuantizationPlan(g, t, {{"x", 0.01f, 3}, {"r1", 0.02f, -128}}, {});
  ASSERT_EQ(plan.pairs.size(), 4u);  // x, r1, w1, w2
  const build::QdqPair& w1 = plan.pairs[2];
  EXPECT_EQ(w1.tensor, "w1");
  EXPECT_EQ(w1.axis, 0);
  ASSERT_EQ(w1.scales.size(), 3u);
  const Tensor& w = *g.value(g.findValue("w1")).constant;
  for (int c = 0; c < 3; ++c) {
    float absMax = 0;
    for (int i = 0; i < 18; ++i) absMax = std::max(absMax, std::abs(w.data<float>()[c * 18 + i]));
    EXPECT_FLOAT_EQ(w1.scales[static_cast<size_t>(c)], absMax / 127);
    for (int i = 0; i < 18; ++i) {
      const float v = w.data<float>()[c * 18 + i];
      EXPECT_EQ(w1.weights.data<int8_t>()[c * 18 + i],
                static_cast<int8_t>(std::nearbyint(v / w1.scales[static_cast<size_t>(c)])));
    }
  }
  EXPECT_EQ(w1.consumers, (std::vector<std::pair<std::string, int>>{{"conv1", 1}}));
  EXPECT_EQ(plan.pairs[0].consumers, (std::vector<std::pair<std::string, int>>{{"conv1", 0}}));
  build::applyQuantizationPlan(plan, g);
  int quantize = 0, dequantize = 0;
  for (const ir::Node& node : g.nodes) {
    quantize += node.opType == "QuantizeLinear";
    dequantize += node.opType == "DequantizeLinear";
  }
  EXPECT_EQ(quantize, 2);
  EXPECT_EQ(dequantize, 4);
  EXPECT_EQ(g.value(g.nodes.back().inputs[0]).name, "r1_dequantized");  // conv2 reads the DQ of r1
}

TEST(CalibrationCache, WritesAndReadsScalesAsFloatBits) {
  build::CalibrationCache cache{CalibrationAlgoType::kMINMAX_CALIBRATION,
                                "0.1.0",
                                "0123456789abcdef",
                                {{"x", 0.0123f, 0}, {"a b: c", 1.5f, -37}}};
  const std::string text = build::formatCalibrationCache(cache);
  EXPECT_EQ(text,
            "kiln-int8-calibration calibrator=minmax kiln=0.1.0 network=0123456789abcdef\n"
            "x: 3c4985f0\n"
            "a b: c: 3fc00000 -37\n");
  const build::CalibrationCache back = build::parseCalibrationCache(text);
  EXPECT_EQ(back.algorithm, CalibrationAlgoType::kMINMAX_CALIBRATION);
  EXPECT_EQ(back.fingerprint, "0123456789abcdef");
  ASSERT_EQ(back.tensors.size(), 2u);
  EXPECT_EQ(back.tensors[0].scale, 0.0123f);
  EXPECT_EQ(back.tensors[1].tensor, "a b: c");
  EXPECT_EQ(back.tensors[1].zeroPoint, -37);
}

void expectCacheError(const std::string& text, const std::string& message) {
  try {
    build::parseCalibrationCache(text);
    FAIL() << "accepted: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(CalibrationCache, MalformedLinesAreNamed) {
  expectCacheError("TRT-8601-EntropyCalibration2\n", "line 1: not a kiln calibration cache");
  expectCacheError("kiln-int8-calibration calibrator=minmax kiln=0.1.0\n",
                   "line 1: the header has no network=");
  expectCacheError("kiln-int8-calibration calibrator=kl kiln=0.1.0 network=00\n",
                   "unknown calibrator 'kl'");
  const std::string header = "kiln-int8-calibration calibrator=entropy kiln=0.1.0 network=00\n";
  expectCacheError(header + "x 3c4985f0\n",
                   "line 2: expected 'tensor_name: SCALE_HEX [ZERO_POINT]'");
  expectCacheError(header + "x: 0.5\n", "line 2: scale '0.5' of 'x' is not 8 hex digits");
  expectCacheError(header + "x: 3c4985f0\ny: 3c4985f0 200\n",
                   "line 3: zero point of 'y' is not an integer in [-128, 127]");
}

TEST(CalibrationCache, ACacheOfAnotherNetworkIsRefusedNamingTheTensor) {
  const ir::Graph g = testing::loadInferredGraph(convNet(), "qcache");
  const build::QuantizationTargets t = build::findQuantizationTargets(g, {});
  const std::string fp = build::networkFingerprint(g, t);
  build::CalibrationCache cache{
      CalibrationAlgoType::kENTROPY_CALIBRATION_2, "0.1.0", fp, {{"x", 0.1f, 0}, {"r1", 0.2f, 0}}};
  EXPECT_EQ(build::matchCalibrationCache(cache, g, t.activations, fp).size(), 2u);
  auto refused = [&](const build::CalibrationCache& c, const std::string& message) {
    try {
      build::matchCalibrationCache(c, g, t.activations, fp);
      FAIL() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("made for another network"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  build::CalibrationCache missing = cache;
  missing.fingerprint = "ffffffffffffffff";
  missing.tensors = {{"x", 0.1f, 0}, {"relu_out", 0.2f, 0}};
  refused(missing, "tensor 'r1', which this network quantizes, is not in it");
  build::CalibrationCache extra = cache;
  extra.fingerprint = "ffffffffffffffff";
  extra.tensors.push_back({"z", 0.3f, 0});
  refused(extra, "its tensor 'z' is not quantized in this network");
  build::CalibrationCache changed = cache;
  changed.fingerprint = "ffffffffffffffff";
  refused(changed, "the quantized layers or the tensors' shapes differ");
}

// Hands out `batches` batches of x, each filled by `fill`; keeps the cache it is given.
class TestCalibrator : public IInt8MinMaxCalibrator {
 public:
  TestCalibrator(int batches, std::function<void(float*, int64_t, int)> fill)
      : batches_(batches), fill_(std::move(fill)) {}
  int32_t getBatchSize() const noexcept override { return 1; }
  bool getBatch(void* bindings[], const char* names[], int32_t n) noexcept override {
    if (next_ >= batches_ || n != 1 || std::string(names[0]) != "x") return false;
    fill_(static_cast<float*>(bindings[0]), 32, next_++);
    return true;
  }
  const void* readCalibrationCache(size_t& length) noexcept override {
    length = cacheIn.size();
    return cacheIn.empty() ? nullptr : cacheIn.data();
  }
  void writeCalibrationCache(const void* cache, size_t length) noexcept override {
    cacheOut.assign(static_cast<const char*>(cache), length);
  }
  std::string cacheIn, cacheOut;

 private:
  int batches_;
  std::function<void(float*, int64_t, int)> fill_;
  int next_ = 0;
};

void fillWave(float* x, int64_t n, int batch) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::sin(0.37f * static_cast<float>(i + 5 * batch)) * 2.0f;
}

struct BuiltNet {
  std::shared_ptr<const Engine> engine;
  BuildReport report;
  std::string error;
};

// `pinFp32`: a layer set to kFLOAT through ILayer::setPrecision, with kOBEY_PRECISION_CONSTRAINTS.
BuiltNet buildConvNet(testing::RecordingLogger& logger, IInt8Calibrator* calibrator,
                      const onnx::ModelProto& model = convNet(), const std::string& pinFp32 = "") {
  Builder builder(logger);
  auto network = builder.createNetwork();
  const std::string path = testing::saveModel(model, testing::tempDir("int8_build") / "m.onnx");
  OnnxParser parser(*network, logger);
  EXPECT_TRUE(parser.parseFromFile(path).ok());
  BuilderConfig config;
  if (!pinFp32.empty()) {
    bool found = false;
    for (int i = 0; i < network->getNbLayers(); ++i) {
      if (network->getLayer(i)->getName() != pinFp32) continue;
      network->getLayer(i)->setPrecision(DataType::kFloat32);
      found = true;
    }
    EXPECT_TRUE(found) << pinFp32;
    config.setFlag(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS);
  }
  if (calibrator) {
    config.setFlag(BuilderFlag::kINT8);
    config.setInt8Calibrator(calibrator);
  }
  BuiltNet built;
  auto plan = builder.buildSerializedNetwork(*network, config, &built.report);
  if (!plan.ok()) {
    built.error = plan.status().message();
    return built;
  }
  auto engine = Runtime(logger).deserializeEngine(plan->data(), plan->size());
  EXPECT_TRUE(engine.ok()) << engine.status().toString();
  built.engine = *engine;
  return built;
}

std::vector<float> runNet(const Engine& engine, const std::vector<float>& x) {
  auto context = engine.createExecutionContext();
  auto out = testing::runContext(**context, engine, {{"x", testing::floats({1, 2, 4, 4}, x)}});
  return testing::values(out.at("y"));
}

TEST(Int8Build, CalibratedConvNetMatchesFloatWithinItsQuantizationError) {
  testing::RecordingLogger logger;
  TestCalibrator calibrator(4, fillWave);
  BuiltNet int8 = buildConvNet(logger, &calibrator);
  ASSERT_TRUE(int8.engine) << int8.error;
  BuiltNet fp32 = buildConvNet(logger, nullptr);
  ASSERT_TRUE(fp32.engine) << fp32.error;
  ASSERT_EQ(int8.report.quantizedTensors.size(), 2u);
  EXPECT_NE(int8.report.quantizedTensors[0].find("int8: tensor 'x': range ["), std::string::npos);
  EXPECT_NE(int8.report.quantizedTensors[0].find("(minmax)"), std::string::npos);
  std::vector<float> x(32);
  fillWave(x.data(), 32, 9);  // held out
  const std::vector<float> a = runNet(*int8.engine, x), b = runNet(*fp32.engine, x);
  double signal = 0, noise = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    signal += double(b[i]) * b[i];
    noise += double(a[i] - b[i]) * (a[i] - b[i]);
  }
  EXPECT_GT(noise, 0) << "the INT8 build computed exactly the float result: nothing was quantized";
  EXPECT_GT(10 * std::log10(signal / noise), 30.0);
  // The cache it wrote names both activations; a build from it alone (no batches) is the same.
  EXPECT_NE(calibrator.cacheOut.find("calibrator=minmax"), std::string::npos)
      << calibrator.cacheOut;
  TestCalibrator cached(0, fillWave);
  cached.cacheIn = calibrator.cacheOut;
  BuiltNet again = buildConvNet(logger, &cached);
  ASSERT_TRUE(again.engine) << again.error;
  EXPECT_EQ(runNet(*again.engine, x), a);
}

TEST(Int8Build, ALayerSetToFloatThroughTheNetworkStaysFloat) {
  testing::RecordingLogger logger;
  TestCalibrator calibrator(4, fillWave);
  BuiltNet pinned = buildConvNet(logger, &calibrator, convNet(), "conv2");
  ASSERT_TRUE(pinned.engine) << pinned.error;
  // conv1 is quantized (its output r1 too, as int8 output); conv2 stays a float Conv marked fp32.
  bool conv1Int8 = false, conv2Float = false;
  for (const std::string& line : pinned.report.layerDecisions) {
    conv1Int8 = conv1Int8 || line.rfind("layer 'conv1' (QConv)", 0) == 0;
    conv2Float = conv2Float || (line.rfind("layer 'conv2' (Conv)", 0) == 0 &&
                                line.find("precision fp32") != std::string::npos);
  }
  EXPECT_TRUE(conv1Int8);
  EXPECT_TRUE(conv2Float);
  // Without the pin conv2 is quantized as well.
  TestCalibrator again(4, fillWave);
  BuiltNet all = buildConvNet(logger, &again);
  ASSERT_TRUE(all.engine) << all.error;
  bool conv2Int8 = false;
  for (const std::string& line : all.report.layerDecisions)
    conv2Int8 = conv2Int8 || line.rfind("layer 'conv2' (QConv)", 0) == 0;
  EXPECT_TRUE(conv2Int8);
}

TEST(Int8Build, BadCalibratorsAreNamed) {
  testing::RecordingLogger logger;
  TestCalibrator none(0, fillWave);
  EXPECT_NE(buildConvNet(logger, &none).error.find("the calibrator returned no batches"),
            std::string::npos);
  EXPECT_NE(
      buildConvNet(logger, &none).error.find("input 'x' needs at least one calibration batch"),
      std::string::npos);
  TestCalibrator nan(3, [](float* x, int64_t n, int batch) {
    fillWave(x, n, batch);
    if (batch == 2) x[5] = NAN;
  });
  EXPECT_NE(buildConvNet(logger, &nan)
                .error.find("calibration batch 2, input 'x': holds NaN at element 5"),
            std::string::npos)
      << buildConvNet(logger, &nan).error;
  class WrongShape : public TestCalibrator {
   public:
    WrongShape() : TestCalibrator(1, fillWave) {}
    bool getBatchTensors(const std::vector<CalibrationInput>& inputs,
                         std::vector<Tensor>& batch) override {
      batch = {Tensor(DataType::kFloat32, {1, 2, 4, 5})};
      return true;
    }
  } wrong;
  const std::string error = buildConvNet(logger, &wrong).error;
  EXPECT_NE(
      error.find(
          "calibration batch 0, input 'x': shape 1x2x4x5 does not match the network's 1x2x4x4"),
      std::string::npos)
      << error;
  TestCalibrator foreign(0, fillWave);
  foreign.cacheIn =
      "kiln-int8-calibration calibrator=minmax kiln=0.1.0 network=0000000000000000\nx: "
      "3c4985f0\nother: 3c4985f0\n";
  const std::string refused = buildConvNet(logger, &foreign).error;
  EXPECT_NE(refused.find("made for another network"), std::string::npos) << refused;
  EXPECT_NE(refused.find("tensor 'r1', which this network quantizes, is not in it"),
            std::string::npos)
      << refused;
}

}  // namespace
}  // namespace kiln
