// Helpers for the engine, network and plan tests: a logger that keeps messages, and
// build -> serialize -> deserialize -> run in one call.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/builder.h"
#include "kiln/engine.h"
#include "kiln/network.h"

namespace kiln::testing {

class RecordingLogger : public ILogger {
 public:
  void log(Severity severity, const std::string& message) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    messages_.emplace_back(severity, message);
  }
  /// Every message at or above `severity`, one per line.
  std::string text(Severity severity = Severity::kVERBOSE) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string s;
    for (const auto& [sev, msg] : messages_)
      if (static_cast<int>(sev) <= static_cast<int>(severity)) s += msg + "\n";
    return s;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<Severity, std::string>> messages_;
};

/// A float32 tensor of the given shape and values.
inline Tensor floats(const Shape& shape, const std::vector<float>& v) {
  return Tensor::fromVector<float>(DataType::kFloat32, shape, v);
}

inline Weights floatWeights(const std::vector<float>& v) {
  return Weights{DataType::kFloat32, v.data(), static_cast<int64_t>(v.size())};
}

/// Builds, serializes and deserializes; fails the test (returning nullptr) on any error.
inline std::shared_ptr<const Engine> buildEngine(ILogger& logger, const NetworkDefinition& network,
                                                 const BuilderConfig& config = {}) {
  Builder builder(logger);
  auto plan = builder.buildSerializedNetwork(network, config);
  EXPECT_TRUE(plan.ok()) << plan.status().toString();
  if (!plan.ok()) return nullptr;
  auto engine = Runtime(logger).deserializeEngine(plan->data(), plan->size());
  EXPECT_TRUE(engine.ok()) << engine.status().toString();
  return engine.ok() ? *engine : nullptr;
}

inline std::vector<float> values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

/// Runs a context on float inputs bound with setInputTensor; returns every output.
inline std::map<std::string, Tensor> runContext(ExecutionContext& context, const Engine& engine,
                                                const std::map<std::string, Tensor>& inputs) {
  for (const auto& [name, t] : inputs) {
    Status s = context.setInputTensor(name, t);
    EXPECT_TRUE(s.ok()) << s.toString();
  }
  Status s = context.execute();
  EXPECT_TRUE(s.ok()) << s.toString();
  std::map<std::string, Tensor> outputs;
  if (!s.ok()) return outputs;
  for (int i = 0; i < engine.getNbIOTensors(); ++i) {
    std::string name = engine.getIOTensorName(i);
    if (engine.getTensorIOMode(name) == TensorIOMode::kOUTPUT)
      outputs[name] = *context.getOutputTensor(name);
  }
  return outputs;
}

}  // namespace kiln::testing
