// Plan files: round trip, and every kind of damage gets a clear kInvalidPlan error, never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernel_registry.h"
#include "engine/plan_bytes.h"
#include "engine/plan_format.h"
#include "engine_test_support.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using ::testing::HasSubstr;

// conv 3x3 + relu + FC + softmax, dynamic batch: constants, attributes of several kinds, a profile.
std::vector<uint8_t> samplePlan(ILogger& logger) {
  auto network = std::make_unique<NetworkDefinition>(logger);
  ITensor* x = network->addInput("x", DataType::kFloat32, {-1, 2, 4, 4});
  std::vector<float> w(3 * 2 * 9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i) - 0.2f;
  ILayer* conv = network->addConvolution(*x, 3, {3, 3}, floatWeights(w),
                                         floatWeights({0.1f, 0.2f, 0.3f}), {.padding = {1, 1}});
  ILayer* relu = network->addActivation(*conv->getOutput(0), ActivationType::kRELU);
  std::vector<float> fw(5 * 48, 0.01f);
  ILayer* fc = network->addFullyConnected(*relu->getOutput(0), 5, floatWeights(fw),
                                          floatWeights(std::vector<float>(5, 0)));
  ILayer* softmax = network->addSoftMax(*fc->getOutput(0), 1);
  softmax->getOutput(0)->setName("y").ok();
  network->markOutput(*softmax->getOutput(0)).ok();
  OptimizationProfile profile;
  profile.setDimensions("x", OptProfileSelector::kMIN, {1, 2, 4, 4});
  profile.setDimensions("x", OptProfileSelector::kOPT, {2, 2, 4, 4});
  profile.setDimensions("x", OptProfileSelector::kMAX, {8, 2, 4, 4});
  BuilderConfig config;
  config.addOptimizationProfile(profile);
  config.setThreads(3);
  config.setBuilderOptimizationLevel(0);  // the heuristics' kernels, which the tests below name
  auto plan = Builder(logger).buildSerializedNetwork(*network, config);
  EXPECT_TRUE(plan.ok()) << plan.status().toString();
  return plan.ok() ? *plan : std::vector<uint8_t>{};
}

// Rewrites the checksum so that a deliberate change reaches the checks after it.
void resign(std::vector<uint8_t>& bytes) { plan::signPlan(bytes); }

Status load(const std::vector<uint8_t>& bytes) {
  RecordingLogger logger;
  auto engine = Runtime(logger).deserializeEngine(bytes.data(), bytes.size());
  return engine.ok() ? Status() : engine.status();
}

TEST(PlanFormat, RoundTripKeepsIOProfilesLayersAndInfo) {
  RecordingLogger logger;
  auto bytes = samplePlan(logger);
  ASSERT_FALSE(bytes.empty());
  EXPECT_TRUE(plan::looksLikePlan(bytes.data(), bytes.size()));
  plan::Plan p = plan::readPlan(bytes.data(), bytes.size());
  EXPECT_EQ(p.info.kilnVersion, plan::kKilnVersion);
  EXPECT_EQ(p.info.threads, 3);
  EXPECT_EQ(p.profiles.size(), 1u);
  EXPECT_EQ(p.profiles[0].entries[0].dims[2], (Shape{8, 2, 4, 4}));
  ASSERT_EQ(p.io.size(), 2u);
  EXPECT_EQ(p.io[0].dims, (Shape{-1, 2, 4, 4}));
  EXPECT_EQ(p.io[1].name, "y");
  EXPECT_EQ(p.layers.size(), p.graph->nodes.size());
  // The Relu is fused into the convolution; the plan keeps the names of the layers it absorbed.
  EXPECT_EQ(p.layers[0].type, "FusedConv");
  // Its kernel: the first float32 FusedConv candidate that takes 2 -> 3 channels, 3x3 (few
  // outputs), after the BF16 one (for layers marked bf16) and the depthwise ones declined, all
  // named with their reasons.
  const std::string isa = cpu::cpuIsaName(cpu::activeCpuIsa());
  EXPECT_EQ(p.layers[0].kernel, "f32_fused_conv_few_outputs_" + isa);
  EXPECT_EQ(p.layers[0].kernelIsa, cpu::isaFeatureName(cpu::activeCpuIsa()));
  ASSERT_GE(p.layers[0].declinedKernels.size(), 2u);
  EXPECT_THAT(p.layers[0].declinedKernels[0],
              HasSubstr("bf16_fused_conv_im2col_gemm_avx512bf16: "));
  EXPECT_THAT(p.layers[0].declinedKernels[1], HasSubstr("f32_fused_conv_depthwise_avx512: "));
  EXPECT_EQ(p.layers[0].fusedFrom.size(), 2u);
  // Writing what was read gives the same bytes.
  EXPECT_EQ(plan::writePlan(p), bytes);
}

TEST(PlanFormat, WeightsAre64ByteAlignedInTheFile) {
  RecordingLogger logger;
  auto bytes = samplePlan(logger);
  ASSERT_FALSE(bytes.empty());
  uint64_t offset = 0;
  for (int s = 0; s < 6; ++s) {
    uint32_t id;
    std::memcpy(&id, &bytes[plan::kHeaderSize + s * 24], 4);
    if (id == plan::kWeightsSection)
      std::memcpy(&offset, &bytes[plan::kHeaderSize + s * 24 + 8], 8);
  }
  EXPECT_GT(offset, 0u);
  EXPECT_EQ(offset % 64, 0u);
}

TEST(PlanErrors, TruncatedAtManyPoints) {
  RecordingLogger logger;
  auto bytes = samplePlan(logger);
  ASSERT_FALSE(bytes.empty());
  for (size_t cut : {size_t{0}, size_t{5}, size_t{8}, size_t{40}, size_t{63}, size_t{64},
                     size_t{100}, bytes.size() / 2, bytes.size() - 64, bytes.size() - 1}) {
    std::vector<uint8_t> part(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut));
    Status s = load(part);
    ASSERT_EQ(s.code(), ErrorCode::kInvalidPlan) << "cut at " << cut;
    if (cut >= 8)
      EXPECT_THAT(s.message(), HasSubstr("truncated")) << "cut at " << cut << ": " << s.message();
  }
}

TEST(PlanErrors, EveryFlippedByteIsDetected) {
  RecordingLogger logger;
  auto bytes = samplePlan(logger);
  ASSERT_FALSE(bytes.empty());
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto damaged = bytes;
    damaged[i] ^= 0x5a;
    try {
      plan::readPlan(damaged.data(), damaged.size());
      FAIL() << "flipped byte " << i << " was not detected";
    } catch (const Error& e) {
      ASSERT_EQ(e.code(), ErrorCode::kInvalidPlan) << "byte " << i << ": " << e.what();
    }
  }
  auto damaged = bytes;
  damaged[bytes.size() - 10] ^= 1;
  EXPECT_THAT(load(damaged).message(), HasSubstr("checksum mismatch"));
}

TEST(PlanErrors, OtherFormatVersion) {
  RecordingLogger logger;
  auto bytes = samplePlan(logger);
  ASSERT_FALSE(bytes.empty());
  uint32_t version = plan::kFormatVersion + 1;
  std::memcpy(&bytes[plan::kFormatVersionOffset], &version, 4);
  resign(bytes);
  Status s = load(bytes);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidPlan);
  EXPECT_THAT(s.message(),
              HasSubstr("plan format version " + std::to_string(version) + " is not supported"));
  EXPECT_THAT(s.message(),
              HasSubstr("reads plan format version " + std::to_string(plan::kFormatVersion)));
}

TEST(PlanErrors, NotAPlan) {
  std::string text =
      "KILNPLAX and some more bytes to pass the header size check, padding padding padding.";
  Status s = load(std::vector<uint8_t>(text.begin(), text.end()));
  EXPECT_THAT(s.message(), HasSubstr("not a kiln plan"));
}

TEST(PlanErrors, MissingCpuFeatures) {
  RecordingLogger logger;
  auto bytes = samplePlan(logger);
  ASSERT_FALSE(bytes.empty());
  try {
    plan::readPlan(bytes.data(), bytes.size(), plan::kAvx2);  // a machine with AVX2 only
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidPlan);
    EXPECT_THAT(e.what(), HasSubstr("CPU features this machine lacks: fma f16c"));
  }
  uint32_t features = plan::kBaselineCpuFeatures | (1u << 30);  // a feature no machine has
  std::memcpy(&bytes[32], &features, 4);
  resign(bytes);
  EXPECT_THAT(load(bytes).message(), HasSubstr("lacks: bit30"));
}

// A layer whose kernel needs an ISA the machine lacks is refused by name, before any kernel is
// made.
TEST(PlanErrors, KernelNeedingAMissingIsaIsRefusedNamingTheLayer) {
  RecordingLogger logger;
  auto bytes = samplePlan(logger);
  ASSERT_FALSE(bytes.empty());
  plan::Plan built = plan::readPlan(bytes.data(), bytes.size());
  if (built.layers[0].kernelIsa !=
      "avx512f") {  // built on an AVX2 machine: as if on an AVX-512 one
    built.layers[0].kernel = "f32_fused_conv_few_outputs_avx512";
    built.layers[0].kernelIsa = "avx512f";
    bytes = plan::writePlan(built);
  }
  try {
    plan::readPlan(bytes.data(), bytes.size(), plan::kBaselineCpuFeatures);  // an AVX2 machine
    FAIL() << "a plan with AVX-512 kernels loaded on an AVX2 machine";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidPlan);
    EXPECT_THAT(e.what(),
                HasSubstr("layer '" + built.layers[0].name + "' (FusedConv): kernel " +
                          built.layers[0].kernel + " needs avx512f, which this machine lacks"));
  }
}

// The engine makes the kernels the plan names; one this kiln does not have is refused by name.
TEST(PlanErrors, UnknownKernelIdIsRefusedNamingTheLayer) {
  RecordingLogger logger;
  auto bytes = samplePlan(logger);
  ASSERT_FALSE(bytes.empty());
  plan::Plan p = plan::readPlan(bytes.data(), bytes.size());
  p.layers[0].kernel = "f32_fused_conv_imaginary_avx2";
  std::vector<uint8_t> changed = plan::writePlan(p);
  Status s = load(changed);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidPlan);
  EXPECT_THAT(s.message(), HasSubstr("layer '" + p.layers[0].name +
                                     "' (FusedConv): kernel f32_fused_conv_imaginary_avx2 is "
                                     "not one this kiln has"));
}

// Damage behind a valid checksum (a buggy or hostile writer): reading must fail cleanly or
// succeed, never crash or read out of bounds (this test runs under AddressSanitizer in CI).
TEST(PlanErrors, RandomDamageBehindAValidChecksum) {
  RecordingLogger logger;
  auto bytes = samplePlan(logger);
  ASSERT_FALSE(bytes.empty());
  std::mt19937 rng(1234);
  int rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    auto damaged = bytes;
    int changes = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < changes; ++k) {
      size_t at = plan::kHeaderSize + rng() % (damaged.size() - plan::kHeaderSize);
      damaged[at] = static_cast<uint8_t>(trial % 3 == 0 ? 0xff : rng());
    }
    resign(damaged);
    try {
      plan::readPlan(damaged.data(), damaged.size());
    } catch (const Error& e) {
      ASSERT_EQ(e.code(), ErrorCode::kInvalidPlan) << e.what();
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 100);
}

TEST(PlanErrors, MissingFile) {
  RecordingLogger logger;
  auto engine = Runtime(logger).deserializeEngineFromFile("/nonexistent/model.kiln");
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), ErrorCode::kIoError);
  EXPECT_THAT(engine.status().message(), HasSubstr("/nonexistent/model.kiln: cannot open"));
}

}  // namespace
}  // namespace kiln
