// Session runs on an engine the builder makes (no optimization profile: dynamic dims take any
// size), through execution contexts: concurrent runs, per-context threads, the BF16 option, and
// no caller tensor kept after a run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "backends/cpu/cpu_isa.h"
#include "engine_test_support.h"
#include "kiln/session.h"
#include "model_builder.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using ::testing::HasSubstr;

constexpr int64_t kIn = 64, kOut = 48;

std::vector<float> weights() {
  std::vector<float> w(kIn * kOut);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.29f * static_cast<float>(i)) * 0.3f;
  return w;
}

// x [N, 64] (N dynamic) -> MatMul w [64, 48] -> Relu -> y [N, 48].
std::string matmulModel() {
  auto m = makeModel();
  addInput(m, "x", {-1, kIn});
  addFloatInitializer(m, "w", {kIn, kOut}, weights());
  addNode(m, "MatMul", {"x", "w"}, {"h"});
  addNode(m, "Relu", {"h"}, {"y"});
  addOutput(m, "y", {-1, kOut});
  return m.SerializeAsString();
}

Tensor rows(int64_t n, uint32_t seed) {
  Tensor x(DataType::kFloat32, {n, kIn});
  for (int64_t i = 0; i < x.numel(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    x.data<float>()[i] = static_cast<float>(seed >> 8) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
  }
  return x;
}

// y = relu(x w), in double.
std::vector<double> reference(const Tensor& x) {
  const std::vector<float> w = weights();
  const int64_t n = x.dim(0);
  std::vector<double> y(static_cast<size_t>(n * kOut));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < kOut; ++j) {
      double s = 0;
      for (int64_t k = 0; k < kIn; ++k)
        s += static_cast<double>(x.data<float>()[i * kIn + k]) * w[k * kOut + j];
      y[i * kOut + j] = std::max(s, 0.0);
    }
  return y;
}

double maxError(const Tensor& got, const std::vector<double>& want) {
  EXPECT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  double e = 0;
  for (int64_t i = 0; i < got.numel(); ++i)
    e = std::max(e, std::fabs(got.data<float>()[i] - want[i]));
  return e;
}

TEST(SessionEngine, DynamicDimsTakeAnySizeWithoutAProfile) {
  const std::string bytes = matmulModel();
  Session session(bytes.data(), bytes.size());
  for (int64_t n : {1, 7, 300, 2}) {
    const Tensor x = rows(n, static_cast<uint32_t>(n));
    NamedTensors out = session.run({{"x", x}});
    ASSERT_EQ(out[0].second.shape(), (Shape{n, kOut}));
    EXPECT_LT(maxError(out[0].second, reference(x)), 1e-4) << "N = " << n;
  }
}

TEST(SessionEngine, ConcurrentRunsEachGetAContextAndMatchSerialRuns) {
  const std::string bytes = matmulModel();
  SessionOptions options;
  options.threads = 2;
  Session session(bytes.data(), bytes.size(), options);
  constexpr int kThreads = 6, kRuns = 30;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRuns; ++r) {
        const Tensor x = rows(1 + (t * 7 + r) % 19, static_cast<uint32_t>(t * 100 + r));
        const double e = maxError(session.run({{"x", x}})[0].second, reference(x));
        if (e > 1e-4 && failures[t].empty())
          failures[t] = "run " + std::to_string(r) + ": error " + std::to_string(e);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
}

TEST(SessionEngine, KeepsNoCallerTensorAfterARun) {
  const std::string bytes = matmulModel();
  Session session(bytes.data(), bytes.size());
  auto storage = std::make_shared<std::vector<float>>(3 * kIn, 0.5f);
  std::weak_ptr<std::vector<float>> watch = storage;
  {
    Tensor x = Tensor::wrap(DataType::kFloat32, {3, kIn}, storage->data(), storage);
    storage.reset();
    NamedTensors out = session.run({{"x", x}});
    EXPECT_EQ(out[0].second.shape(), (Shape{3, kOut}));
  }
  EXPECT_TRUE(watch.expired()) << "the session still holds the input it was given";
}

TEST(SessionEngine, Bf16OptionComputesInBf16WhereTheCpuHasIt) {
  const std::string bytes = matmulModel();
  SessionOptions bf16;
  bf16.bf16 = true;
  Session fp32Session(bytes.data(), bytes.size());
  Session bf16Session(bytes.data(), bytes.size(), bf16);
  const Tensor x = rows(16, 5);
  const std::vector<double> want = reference(x);
  const double fp32Error = maxError(fp32Session.run({{"x", x}})[0].second, want);
  const double bf16Error = maxError(bf16Session.run({{"x", x}})[0].second, want);
  EXPECT_LT(fp32Error, 1e-4);
  if (!cpu::cpuSupports(cpu::CpuIsa::kAvx512Bf16)) {
    EXPECT_EQ(bf16Error, fp32Error) << "without AVX512_BF16 the session runs FP32";
    return;
  }
  // BF16 rounds each operand to 8 bits of mantissa: visibly less exact than FP32, within the bound
  // of 64 products of operands below 1 and 0.3.
  EXPECT_GT(bf16Error, 10 * fp32Error);
  EXPECT_LT(bf16Error, kIn * 0.3 * 2 * std::ldexp(1.0, -8));
}

// SessionOptions::allocationLimitBytes: a shape whose tensors need more than the limit fails at
// once, naming the node, the output and the shape; smaller shapes still run.
TEST(SessionEngine, AnAllocationLimitRefusesAShapeNamingTheNodeAndOutput) {
  const std::string bytes = matmulModel();
  SessionOptions options;
  options.allocationLimitBytes = 64 << 10;
  Session session(bytes.data(), bytes.size(), options);
  const Tensor small = rows(8, 1);
  EXPECT_LT(maxError(session.run({{"x", small}})[0].second, reference(small)), 1e-4);
  try {
    session.run({{"x", rows(1000, 2)}});  // h and y: 1000 x 48 floats = 192000 bytes each
    FAIL() << "a run over the allocation limit succeeded";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("(MatMul): output 0 'h' float32[1000x48] needs 192000 bytes, "
                                    "over the allocation limit of 65536 bytes"));
  }
  EXPECT_LT(maxError(session.run({{"x", small}})[0].second, reference(small)), 1e-4);
}

TEST(ContextThreads, AContextsAllocationLimitCoversItsRuns) {
  RecordingLogger logger;
  NetworkDefinition network(logger);
  ITensor* x = network.addInput("x", DataType::kFloat32, {-1, kIn});
  ILayer* fc = network.addFullyConnected(*x, kOut, floatWeights(weights()), {});
  ILayer* relu = network.addActivation(*fc->getOutput(0), ActivationType::kRELU);
  ASSERT_TRUE(relu->getOutput(0)->setName("y").ok());
  ASSERT_TRUE(network.markOutput(*relu->getOutput(0)).ok());
  OptimizationProfile profile;
  profile.setDimensions("x", OptProfileSelector::kMIN, {1, kIn});
  profile.setDimensions("x", OptProfileSelector::kOPT, {8, kIn});
  profile.setDimensions("x", OptProfileSelector::kMAX, {4096, kIn});
  BuilderConfig config;
  config.addOptimizationProfile(profile);
  auto engine = buildEngine(logger, network, config);
  ASSERT_TRUE(engine);
  auto context = engine->createExecutionContext();
  ASSERT_TRUE(context.ok());
  (*context)->setAllocationLimit(64 << 10);
  EXPECT_EQ((*context)->getAllocationLimit(), 64u << 10);
  ASSERT_TRUE((*context)->setInputTensor("x", rows(4000, 3)).ok());
  Status s = (*context)->execute();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(),
              HasSubstr("needs 768000 bytes, over the allocation limit of 65536 bytes"));

  // The build checks the profiles' shapes against its own limit.
  config.setAllocationLimit(64 << 10);
  auto plan = Builder(logger).buildSerializedNetwork(network, config);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(
      plan.status().message(),
      HasSubstr("optimization profile 0 max shapes (x:4096x64): input 'x' float32[4096x64] needs "
                "1048576 bytes, over the allocation limit of 65536 bytes"));
}

// An engine built for one thread: each context may choose its own count.
TEST(ContextThreads, EachContextChoosesItsThreadCount) {
  RecordingLogger logger;
  NetworkDefinition network(logger);
  ITensor* x = network.addInput("x", DataType::kFloat32, {8, kIn});
  ILayer* fc = network.addFullyConnected(*x, kOut, floatWeights(weights()), {});
  ASSERT_TRUE(fc->getOutput(0)->setName("y").ok());
  ASSERT_TRUE(network.markOutput(*fc->getOutput(0)).ok());
  BuilderConfig config;
  config.setThreads(1);
  auto engine = buildEngine(logger, network, config);
  ASSERT_TRUE(engine);
  auto one = engine->createExecutionContext();
  auto two = engine->createExecutionContext();
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ((*one)->getThreads(), 1);
  ASSERT_TRUE((*two)->setThreads(2).ok());
  EXPECT_EQ((*two)->getThreads(), 2);
  const Tensor input = rows(8, 3);
  EXPECT_EQ(values(runContext(**one, *engine, {{"x", input}})["y"]),
            values(runContext(**two, *engine, {{"x", input}})["y"]));
  Status bad = (*two)->setThreads(-1);
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("threads must be >= 0"));
}

}  // namespace
}  // namespace kiln
