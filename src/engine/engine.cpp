// Engine (an inspector over the loaded plan) and Runtime (plan bytes or file -> Engine).
#include <algorithm>
#include <fstream>

#include "engine/api_guard.h"
#include "engine/engine_impl.h"

namespace kiln {

int Engine::Impl::findIO(const std::string& name) const {
  for (size_t i = 0; i < plan.io.size(); ++i)
    if (plan.io[i].name == name) return static_cast<int>(i);
  return -1;
}

std::shared_ptr<const Engine::Impl> loadEngine(plan::Plan plan) {
  auto impl = std::make_shared<Engine::Impl>();
  impl->plan = std::move(plan);
  // Outputs in the I/O list follow the graph's output order; the context relies on it.
  size_t k = 0;
  for (const plan::IOTensor& t : impl->plan.io) {
    if (t.mode != TensorIOMode::kOUTPUT) continue;
    const auto& outs = impl->plan.graph->outputs;
    if (k >= outs.size() || outs[k] != t.valueId) {
      throw Error(ErrorCode::kInvalidPlan, "plan outputs do not match its graph's outputs");
    }
    ++k;
  }
  if (k != impl->plan.graph->outputs.size()) throw Error(ErrorCode::kInvalidPlan, "plan outputs do not match its graph's outputs");
  impl->executor = std::make_unique<Executor>(impl->plan.graph, Executor::kFreeCopiedWeights);
  return impl;
}

int Engine::getNbIOTensors() const { return static_cast<int>(impl_->plan.io.size()); }

std::string Engine::getIOTensorName(int index) const {
  if (index < 0 || index >= getNbIOTensors()) return "";
  return impl_->plan.io[static_cast<size_t>(index)].name;
}

TensorIOMode Engine::getTensorIOMode(const std::string& name) const {
  int i = impl_->findIO(name);
  return i < 0 ? TensorIOMode::kNONE : impl_->plan.io[static_cast<size_t>(i)].mode;
}

DataType Engine::getTensorDataType(const std::string& name) const {
  int i = impl_->findIO(name);
  return i < 0 ? DataType::kUndefined : impl_->plan.io[static_cast<size_t>(i)].dtype;
}

Dims Engine::getTensorShape(const std::string& name) const {
  int i = impl_->findIO(name);
  return i < 0 ? Dims{} : impl_->plan.io[static_cast<size_t>(i)].dims;
}

bool Engine::hasDefaultValue(const std::string& name) const {
  int i = impl_->findIO(name);
  return i >= 0 && impl_->plan.io[static_cast<size_t>(i)].hasDefault;
}

int Engine::getNbOptimizationProfiles() const { return static_cast<int>(impl_->plan.profiles.size()); }

namespace {
const plan::ProfileEntry* profileEntry(const plan::Plan& p, const std::string& input, int profile) {
  if (profile < 0 || profile >= static_cast<int>(p.profiles.size())) return nullptr;
  return p.profiles[static_cast<size_t>(profile)].find(input);
}
}  // namespace

Dims Engine::getProfileShape(const std::string& inputName, int profileIndex, OptProfileSelector which) const {
  const auto* e = profileEntry(impl_->plan, inputName, profileIndex);
  return e ? e->dims[static_cast<int>(which)] : Dims{};
}

std::vector<int64_t> Engine::getProfileShapeValues(const std::string& inputName, int profileIndex,
                                                   OptProfileSelector which) const {
  const auto* e = profileEntry(impl_->plan, inputName, profileIndex);
  return e ? e->values[static_cast<int>(which)] : std::vector<int64_t>{};
}

int Engine::getNbLayers() const { return static_cast<int>(impl_->plan.layers.size()); }
const LayerInfo& Engine::getLayerInfo(int index) const { return impl_->plan.layers.at(static_cast<size_t>(index)); }
const PlanInfo& Engine::getPlanInfo() const { return impl_->plan.info; }

Result<std::shared_ptr<const Engine>> Runtime::deserializeEngine(const void* data, size_t size) const {
  return guardResult<std::shared_ptr<const Engine>>(&logger_, [&] {
    plan::Plan p = plan::readPlan(data, size);
    if (p.info.kilnVersion != plan::kKilnVersion) {
      logger_.log(Severity::kWARNING, "plan was built by kiln " + p.info.kilnVersion + ", this is kiln " +
                                          plan::kKilnVersion + " (same plan format; results should match)");
    }
    logger_.log(Severity::kINFO, "loaded plan: " + std::to_string(p.layers.size()) + " layers, " +
                                     std::to_string(p.profiles.size()) + " optimization profile(s)");
    return std::make_shared<const Engine>(loadEngine(std::move(p)));
  });
}

Result<std::shared_ptr<const Engine>> Runtime::deserializeEngineFromFile(const std::string& path) const {
  std::string bytes;
  Status read = guardStatus(nullptr, [&] {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw Error(ErrorCode::kIoError, path + ": cannot open the plan file");
    // One buffer of the file's size: a stringstream would hold the plan twice.
    bytes.resize(static_cast<size_t>(std::max<std::streamoff>(in.tellg(), 0)));
    in.seekg(0, std::ios::beg);
    if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
      throw Error(ErrorCode::kIoError, path + ": cannot read the plan file");
  });
  if (!read.ok()) {
    logger_.log(Severity::kERROR, read.message());
    return read;
  }
  auto engine = deserializeEngine(bytes.data(), bytes.size());
  if (!engine.ok()) return Status(engine.status().code(), path + ": " + engine.status().message());
  return engine;
}

}  // namespace kiln
