// Tactic selection and the timing cache (build/tactics.h, kiln/timing_cache.h): level 0 keeps the
// heuristics' kernels; level 3 times the candidates and records times and winner in the plan,
// which a load makes without timing; a cache answers a rebuild (nothing timed), entries of
// another CPU are not used, damaged cache bytes are refused by message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernel_registry.h"
#include "build/layer_timing.h"
#include "engine/engine_impl.h"
#include "engine_test_support.h"
#include "random_data.h"

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;

// x [1, 32, 14, 14] -> conv 3x3 (pad 1) -> Relu -> conv 1x1 (32 -> 16) -> fully connected
// (3136 -> 10) -> y. The fully connected layer has two candidates even on an AVX2-only host
// (packed B and the any-dtype Gemm), so something is timed on every CPU.
struct ConvNet {
  std::vector<float> w1 = randomFloats(32 * 32 * 9, 1), b1 = randomFloats(32, 2);
  std::vector<float> w2 = randomFloats(16 * 32, 3), b2 = randomFloats(16, 4);
  std::vector<float> w3 = randomFloats(10 * 16 * 14 * 14, 5), b3 = randomFloats(10, 6);
  std::unique_ptr<NetworkDefinition> network;

  explicit ConvNet(ILogger& logger) : network(std::make_unique<NetworkDefinition>(logger)) {
    ITensor* x = network->addInput("x", DataType::kFloat32, {1, 32, 14, 14});
    ConvolutionParams pad;
    pad.padding = {1, 1};
    ILayer* c1 = network->addConvolution(*x, 32, {3, 3}, floatWeights(w1), floatWeights(b1), pad);
    c1->setName("conv3x3");
    ITensor* h = network->addActivation(*c1->getOutput(0), ActivationType::kRELU)->getOutput(0);
    ILayer* c2 = network->addConvolution(*h, 16, {1, 1}, floatWeights(w2), floatWeights(b2));
    c2->setName("conv1x1");
    ILayer* fc =
        network->addFullyConnected(*c2->getOutput(0), 10, floatWeights(w3), floatWeights(b3));
    fc->setName("fc");
    EXPECT_TRUE(fc->getOutput(0)->setName("y").ok());
    EXPECT_TRUE(network->markOutput(*fc->getOutput(0)).ok());
  }
};

BuilderConfig config(int level, ITimingCache* cache = nullptr) {
  BuilderConfig c;
  c.setThreads(1);
  c.setBuilderOptimizationLevel(level);
  c.setTimingCache(cache);
  return c;
}

std::vector<uint8_t> build(ILogger& logger, const NetworkDefinition& network,
                           const BuilderConfig& c, BuildReport& report) {
  auto plan = Builder(logger).buildSerializedNetwork(network, c, &report);
  EXPECT_TRUE(plan.ok()) << plan.status().toString();
  return plan.ok() ? *plan : std::vector<uint8_t>{};
}

plan::Plan readPlan(const std::vector<uint8_t>& bytes) {
  return plan::readPlan(bytes.data(), bytes.size());
}

std::unique_ptr<ITimingCache> emptyCache() {
  auto cache = createTimingCache(nullptr, 0);
  return std::move(*cache);
}

// A cache with `from`'s entries, each key and time passed through `edit`.
template <typename Edit>
std::unique_ptr<ITimingCache> editedCache(const ITimingCache& from, Edit edit) {
  auto out = emptyCache();
  for (const std::string& key : from.keys()) {
    std::string k = key;
    double ms = *from.query(key);
    edit(k, ms);
    out->update(k, ms);
  }
  return out;
}

// The kernel id a key ends with.
std::string kernelOf(const std::string& key) { return key.substr(key.rfind(";kernel=") + 8); }

TEST(Tactics, LevelZeroKeepsTheHeuristicsChoice) {
  RecordingLogger logger;
  ConvNet net(logger);
  BuildReport report;
  const plan::Plan p = readPlan(build(logger, *net.network, config(0), report));
  EXPECT_EQ(report.tacticLayersTimed, 0);
  EXPECT_EQ(report.tacticRuns, 0);
  EXPECT_EQ(p.info.builderOptimizationLevel, 0);
  const cpu::KernelRegistry& registry = cpu::KernelRegistry::global();
  for (size_t i = 0; i < p.layers.size(); ++i) {
    EXPECT_EQ(p.layers[i].kernelChoice, "heuristics") << p.layers[i].name;
    EXPECT_TRUE(p.layers[i].tactics.empty()) << p.layers[i].name;
    const cpu::KernelSelection s =
        registry.select(build::timingCreateInfo(*p.graph, p.graph->nodes[i]));
    ASSERT_NE(s.chosen, nullptr) << p.layers[i].name;
    EXPECT_EQ(p.layers[i].kernel, s.chosen->id) << p.layers[i].name;
  }
}

TEST(Tactics, LevelThreeRecordsTimingsAndTheFastestAndALoadMakesIt) {
  RecordingLogger logger;
  ConvNet net(logger);
  BuildReport report;
  const std::vector<uint8_t> bytes = build(logger, *net.network, config(3), report);
  ASSERT_FALSE(bytes.empty());
  EXPECT_GE(report.tacticLayersTimed, 1);
  EXPECT_EQ(report.tacticLayersFromCache, 0);
  plan::Plan p = readPlan(bytes);
  EXPECT_EQ(p.info.builderOptimizationLevel, 3);
  int timedLayers = 0;
  for (const LayerInfo& l : p.layers) {
    if (l.kernelChoice != "timed") continue;
    ++timedLayers;
    int timed = 0;
    double best = 1e300;
    std::string fastest;
    for (const TacticTiming& t : l.tactics) {
      if (t.milliseconds < 0) {
        EXPECT_FALSE(t.note.empty()) << l.name << " " << t.kernel;
        continue;
      }
      ++timed;
      if (t.milliseconds < best) best = t.milliseconds, fastest = t.kernel;
    }
    EXPECT_GE(timed, 2) << l.name;
    EXPECT_EQ(l.kernel, fastest) << l.name;
  }
  EXPECT_EQ(timedLayers, report.tacticLayersTimed);
  EXPECT_THAT(logger.text(Severity::kINFO), HasSubstr("layers timed"));

  // The load makes the recorded kernels (from the plan's ids, nothing selected or timed).
  const std::vector<LayerInfo> recorded = p.layers;
  auto engine = loadEngine(std::move(p));
  const auto& choices = engine->executor->kernelChoices();
  ASSERT_EQ(choices.size(), recorded.size());
  for (size_t i = 0; i < recorded.size(); ++i)
    EXPECT_EQ(choices[i].id, recorded[i].kernel) << recorded[i].name;
}

// A level-3 build into an empty cache: the cache it fills.
std::unique_ptr<ITimingCache> coldBuild(ILogger& logger, const ConvNet& net, BuildReport& report,
                                        std::vector<uint8_t>* plan = nullptr) {
  auto cache = emptyCache();
  std::vector<uint8_t> bytes = build(logger, *net.network, config(3, cache.get()), report);
  if (plan) *plan = std::move(bytes);
  return cache;
}

// Under an AVX2 limit (an AVX2-only CPU, as tests force it) the AVX-512 candidates decline and
// the rest are timed: the fully connected layer's packed-B and any-dtype Gemm at least.
TEST(Tactics, AnAvx2LimitedHostTimesWhatItCanRun) {
  cpu::ScopedCpuIsaLimit limit(cpu::CpuIsa::kAvx2);
  RecordingLogger logger;
  ConvNet net(logger);
  BuildReport report;
  plan::Plan p = readPlan(build(logger, *net.network, config(3), report));
  EXPECT_GE(report.tacticLayersTimed, 1);
  std::vector<std::string> ids;
  for (const LayerInfo& l : p.layers) {
    ids.push_back(l.kernel);
    EXPECT_EQ(l.kernel.find("avx512"), std::string::npos) << l.name << ": " << l.kernel;
    for (const TacticTiming& t : l.tactics)
      if (t.kernel.find("avx512") != std::string::npos)
        EXPECT_LT(t.milliseconds, 0) << l.name << ": " << t.kernel;
  }
  auto engine = loadEngine(std::move(p));
  for (size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(engine->executor->kernelChoices()[i].id, ids[i]);
}

TEST(Tactics, TimingCacheAnswersARebuildAndItsWinnerIsRecordedAndLoaded) {
  RecordingLogger logger;
  ConvNet net(logger);
  BuildReport first;
  std::vector<uint8_t> coldPlan;
  auto cold = coldBuild(logger, net, first, &coldPlan);
  std::map<std::string, std::string> coldKernel;  // layer name -> the cold build's kernel
  for (const LayerInfo& l : readPlan(coldPlan).layers) coldKernel[l.name] = l.kernel;
  ASSERT_GE(first.tacticLayersTimed, 1);
  ASSERT_GT(cold->size(), 0);
  // Plant times that make, for each layer, a candidate other than the cold build's winner the
  // fastest: the first such in key order, so neither list order nor the cold times pick it.
  std::map<std::string, std::pair<std::string, double>> fastest;  // layer part -> (kernel, ms)
  for (const std::string& key : cold->keys()) {
    const std::string layer = key.substr(0, key.rfind(";kernel="));
    const double ms = *cold->query(key);
    if (!fastest.count(layer) || ms < fastest[layer].second) fastest[layer] = {kernelOf(key), ms};
  }
  std::map<std::string, std::string> chosen;  // layer part -> planted winner
  for (const std::string& key : cold->keys()) {
    const std::string layer = key.substr(0, key.rfind(";kernel="));
    // Slower than the fastest, so not one tied with the cold build's winner either.
    if (!chosen.count(layer) && *cold->query(key) > fastest[layer].second)
      chosen[layer] = kernelOf(key);
  }
  auto planted = editedCache(*cold, [&](std::string& key, double& ms) {
    ms = kernelOf(key) == chosen[key.substr(0, key.rfind(";kernel="))] ? 0.001 : 1.0;
  });
  std::set<std::string> plantedWinners;
  for (const auto& [layer, winner] : chosen) plantedWinners.insert(winner);

  BuildReport second;
  const std::vector<uint8_t> bytes = build(logger, *net.network, config(3, planted.get()), second);
  EXPECT_EQ(second.tacticLayersTimed, 0);
  EXPECT_EQ(second.tacticRuns, 0);
  EXPECT_EQ(second.tacticLayersFromCache, first.tacticLayersTimed);
  EXPECT_THAT(logger.text(Severity::kINFO),
              HasSubstr("0 layers timed (0 runs), " + std::to_string(first.tacticLayersTimed) +
                        " from the timing cache"));
  plan::Plan p2 = readPlan(bytes);
  std::vector<std::string> ids;
  for (const LayerInfo& l : p2.layers) {
    ids.push_back(l.kernel);
    if (l.kernelChoice != "timing cache") continue;
    EXPECT_TRUE(plantedWinners.count(l.kernel)) << l.name << ": " << l.kernel;
    EXPECT_NE(l.kernel, coldKernel[l.name])
        << l.name << ": the cache's times, not the cold build's, choose";
  }
  auto engine = loadEngine(std::move(p2));
  for (size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(engine->executor->kernelChoices()[i].id, ids[i]);
}

TEST(Tactics, CacheMissTimesAndAddsEntries) {
  RecordingLogger logger;
  ConvNet net(logger);
  auto cache = emptyCache();
  cache->update(timingCacheCpuKey() + ";kiln=0.1.0;threads=1;layer=another;kernel=k", 2.0);
  BuildReport report;
  build(logger, *net.network, config(3, cache.get()), report);
  EXPECT_GE(report.tacticLayersTimed, 1);
  EXPECT_EQ(report.tacticLayersFromCache, 0);
  EXPECT_GT(cache->size(), 1);
  EXPECT_EQ(cache->entriesForOtherCpus(), 0);
}

TEST(Tactics, EntriesOfAnotherCpuAreNotUsed) {
  RecordingLogger logger;
  ConvNet net(logger);
  BuildReport first;
  auto cold = coldBuild(logger, net, first);
  const std::string mine = timingCacheCpuKey();
  auto foreign = editedCache(*cold, [&](std::string& key, double&) {
    key = "cpu=Some Other CPU|avx2 fma" + key.substr(mine.size());
  });
  ASSERT_EQ(foreign->entriesForOtherCpus(), cold->size());
  BuildReport second;
  build(logger, *net.network, config(3, foreign.get()), second);
  EXPECT_EQ(second.tacticLayersTimed, first.tacticLayersTimed);
  EXPECT_EQ(second.tacticLayersFromCache, 0);
  EXPECT_THAT(logger.text(Severity::kWARNING),
              HasSubstr("entries were timed on another CPU and are not used on this one"));
  EXPECT_EQ(foreign->size(), 2 * cold->size());  // this CPU's entries added beside the other's
}

TEST(Tactics, CacheBytesRoundTripAndDamageIsRefusedByMessage) {
  auto cache = emptyCache();
  cache->update(timingCacheCpuKey() + ";kiln=0.1.0;threads=2;layer=L;kernel=a", 1.5);
  cache->update(timingCacheCpuKey() + ";kiln=0.1.0;threads=2;layer=L;kernel=b", 0.25);
  const std::vector<uint8_t> bytes = cache->serialize();
  auto back = createTimingCache(bytes.data(), bytes.size(), "t.cache");
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ((*back)->keys(), cache->keys());
  EXPECT_EQ(*(*back)->query(cache->keys()[1]), 0.25);
  auto combined = emptyCache();
  EXPECT_EQ(combined->combine(**back), 2);
  EXPECT_EQ(combined->combine(**back), 0);

  auto refused = [](std::vector<uint8_t> b, const std::string& expected) {
    auto r = createTimingCache(b.data(), b.size(), "t.cache");
    ASSERT_FALSE(r.ok()) << expected;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("timing cache 't.cache': "));
    EXPECT_THAT(r.status().message(), HasSubstr(expected));
  };
  std::vector<uint8_t> damaged = bytes;
  damaged[damaged.size() - 3] ^= 0x40;
  refused(damaged, "checksum mismatch");
  std::vector<uint8_t> magic = bytes;
  magic[0] = 'X';
  refused(magic, "not a kiln timing cache");
  refused(std::vector<uint8_t>(bytes.begin(), bytes.end() - 5), "truncated");
  std::vector<uint8_t> version = bytes;
  version[8] = 9;
  refused(version, "cache format version 9");
}

TEST(Tactics, OptimizationLevelOutsideZeroToFiveFailsTheBuild) {
  RecordingLogger logger;
  ConvNet net(logger);
  auto plan = Builder(logger).buildSerializedNetwork(*net.network, config(6));
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("builder optimization level 6 is not in 0..5"));
}

}  // namespace
}  // namespace kiln::testing
