// One engine, many contexts: 8 threads x 100 inferences on different inputs give the same
// results as a single-threaded run; enqueue() completes like execute().
#include <gtest/gtest.h>

#include <thread>

#include "engine_test_support.h"

namespace kiln {
namespace {

using namespace kiln::testing;

std::shared_ptr<const Engine> smallCnn(RecordingLogger& logger) {
  NetworkDefinition network(logger);
  ITensor* x = network.addInput("x", DataType::kFloat32, {-1, 3, 8, 8});
  std::vector<float> w(4 * 3 * 9);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<float>(static_cast<int>(i % 11) - 5) * 0.05f;
  ILayer* conv = network.addConvolution(*x, 4, {3, 3}, floatWeights(w),
                                        floatWeights({0.1f, 0, -0.1f, 0.2f}), {.padding = {1, 1}});
  ILayer* relu = network.addActivation(*conv->getOutput(0), ActivationType::kRELU);
  ILayer* pool =
      network.addPooling(*relu->getOutput(0), PoolingType::kMAX, {2, 2}, {.strides = {2, 2}});
  std::vector<float> fw(10 * 64);
  for (size_t i = 0; i < fw.size(); ++i)
    fw[i] = static_cast<float>(static_cast<int>(i % 13) - 6) * 0.02f;
  ILayer* fc = network.addFullyConnected(*pool->getOutput(0), 10, floatWeights(fw), {});
  ILayer* soft = network.addSoftMax(*fc->getOutput(0), 1);
  soft->getOutput(0)->setName("y").ok();
  network.markOutput(*soft->getOutput(0)).ok();
  OptimizationProfile profile;
  profile.setDimensions("x", OptProfileSelector::kMIN, {1, 3, 8, 8});
  profile.setDimensions("x", OptProfileSelector::kOPT, {2, 3, 8, 8});
  profile.setDimensions("x", OptProfileSelector::kMAX, {4, 3, 8, 8});
  BuilderConfig config;
  config.addOptimizationProfile(profile);
  return buildEngine(logger, network, config);
}

Tensor inputFor(int thread, int iteration) {
  Tensor t(DataType::kFloat32, {1 + (thread + iteration) % 4, 3, 8, 8});
  uint32_t state = static_cast<uint32_t>(thread * 1000 + iteration + 1);
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 1664525u + 1013904223u;
    t.data<float>()[i] = static_cast<float>(state >> 8) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
  }
  return t;
}

constexpr int kThreads = 8;
constexpr int kIterations = 100;

TEST(EngineThreads, EightContextsOnOneEngineMatchASingleThreadedRun) {
  RecordingLogger logger;
  auto engine = smallCnn(logger);
  ASSERT_TRUE(engine);
  std::vector<std::vector<std::vector<float>>> expected(
      kThreads, std::vector<std::vector<float>>(kIterations));
  {
    auto context = engine->createExecutionContext();
    for (int t = 0; t < kThreads; ++t)
      for (int i = 0; i < kIterations; ++i)
        expected[t][i] = values(runContext(**context, *engine, {{"x", inputFor(t, i)}})["y"]);
  }
  std::vector<std::vector<std::vector<float>>> got(kThreads,
                                                   std::vector<std::vector<float>>(kIterations));
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto context = engine->createExecutionContext();
      if (!context.ok()) {
        errors[t] = context.status().toString();
        return;
      }
      for (int i = 0; i < kIterations; ++i) {
        Tensor x = inputFor(t, i);
        std::vector<float> out(static_cast<size_t>(x.dim(0)) * 10);
        Status s = (*context)->setInputTensor("x", x);
        if (s.ok()) s = (*context)->setTensorAddress("y", out.data(), out.size() * 4);
        if (s.ok()) s = (*context)->execute();
        if (!s.ok()) {
          errors[t] = s.toString();
          return;
        }
        got[t][i] = std::move(out);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(errors[t], "") << "thread " << t;
    for (int i = 0; i < kIterations; ++i)
      ASSERT_EQ(got[t][i], expected[t][i]) << "thread " << t << " run " << i;
  }
}

TEST(EngineThreads, EnqueueReturnsAHandleToWaitOn) {
  RecordingLogger logger;
  auto engine = smallCnn(logger);
  ASSERT_TRUE(engine);
  auto context = engine->createExecutionContext();
  Tensor x = inputFor(3, 7);
  ASSERT_TRUE((*context)->setInputTensor("x", x).ok());
  CompletionEvent done = (*context)->enqueue();
  Status s = done.wait();
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_TRUE(done.ready());
  auto viaEnqueue = values(*(*context)->getOutputTensor("y"));
  auto viaExecute = values(runContext(**context, *engine, {{"x", x}})["y"]);
  EXPECT_EQ(viaExecute.size(), static_cast<size_t>(x.dim(0)) * 10);
  EXPECT_EQ(viaEnqueue, viaExecute);
  EXPECT_EQ(CompletionEvent().wait().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln
