// Engine (an inspector over the loaded plan) and Runtime (plan bytes or file -> Engine).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/api_guard.h"
#include "engine/engine_impl.h"

namespace kiln {

int Engine::Impl::findIO(const std::string& name) const {
  for (size_t i = 0; i < plan.io.size(); ++i)
    if (plan.io[i].name == name) return static_cast<int>(i);
  return -1;
}

namespace {

// Outputs in the I/O list follow the graph's output order; the context relies on it.
void checkOutputOrder(const plan::Plan& plan) {
  size_t k = 0;
  for (const plan::IOTensor& t : plan.io) {
    if (t.mode != TensorIOMode::kOUTPUT) continue;
    const auto& outs = plan.graph->outputs;
    if (k >= outs.size() || outs[k] != t.valueId) {
      throw Error(ErrorCode::kInvalidPlan, "plan outputs do not match its graph's outputs");
    }
    ++k;
  }
  if (k != plan.graph->outputs.size())
    throw Error(ErrorCode::kInvalidPlan, "plan outputs do not match its graph's outputs");
}

}  // namespace

std::shared_ptr<const Engine::Impl> loadEngine(plan::Plan plan,
                                               std::shared_ptr<const void> mapping) {
  checkOutputOrder(plan);
  auto impl = std::make_shared<Engine::Impl>();
  impl->plan = std::move(plan);
  impl->mapping = std::move(mapping);
  // The kernels the builder chose, made again from the plan (not selected again), those that
  // pack weights over the packed state the plan holds (in the mapped file: nothing is packed).
  std::vector<std::string> kernelIds;
  for (const LayerInfo& layer : impl->plan.layers) kernelIds.push_back(layer.kernel);
  impl->executor = std::make_unique<Executor>(impl->plan.graph, Executor::kFreeCopiedWeights,
                                              kernelIds, &impl->plan.kernelStates);
  return impl;
}

std::shared_ptr<const Engine::Impl> engineFromKernels(plan::Plan plan,
                                                      std::unique_ptr<Executor> kernels) {
  checkOutputOrder(plan);
  auto impl = std::make_shared<Engine::Impl>();
  impl->plan = std::move(plan);
  impl->executor = std::move(kernels);
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

Shape Engine::getTensorShape(const std::string& name) const {
  int i = impl_->findIO(name);
  return i < 0 ? Shape{} : impl_->plan.io[static_cast<size_t>(i)].dims;
}

bool Engine::hasDefaultValue(const std::string& name) const {
  int i = impl_->findIO(name);
  return i >= 0 && impl_->plan.io[static_cast<size_t>(i)].hasDefault;
}

int Engine::getNbOptimizationProfiles() const {
  return static_cast<int>(impl_->plan.profiles.size());
}

namespace {
const plan::ProfileEntry* profileEntry(const plan::Plan& p, const std::string& input, int profile) {
  if (profile < 0 || profile >= static_cast<int>(p.profiles.size())) return nullptr;
  return p.profiles[static_cast<size_t>(profile)].find(input);
}
}  // namespace

Shape Engine::getProfileShape(const std::string& inputName, int profileIndex,
                              OptProfileSelector which) const {
  const auto* e = profileEntry(impl_->plan, inputName, profileIndex);
  return e ? e->dims[static_cast<int>(which)] : Shape{};
}

std::vector<int64_t> Engine::getProfileShapeValues(const std::string& inputName, int profileIndex,
                                                   OptProfileSelector which) const {
  const auto* e = profileEntry(impl_->plan, inputName, profileIndex);
  return e ? e->values[static_cast<int>(which)] : std::vector<int64_t>{};
}

int Engine::getNbLayers() const { return static_cast<int>(impl_->plan.layers.size()); }
const LayerInfo& Engine::getLayerInfo(int index) const {
  return impl_->plan.layers.at(static_cast<size_t>(index));
}
const PlanInfo& Engine::getPlanInfo() const { return impl_->plan.info; }

namespace {

// Reads and loads a plan; with `owner` (the file's mapping), its constants view the bytes in place.
std::shared_ptr<const Engine> loadPlanBytes(ILogger& logger, const void* data, size_t size,
                                            std::shared_ptr<const void> owner,
                                            plan::PackedCheck packedCheck) {
  plan::Plan p = plan::readPlan(data, size, plan::detectCpuFeatures(), owner, packedCheck);
  if (p.info.kilnVersion != plan::kKilnVersion) {
    logger.log(Severity::kWARNING, "plan was built by kiln " + p.info.kilnVersion +
                                       ", this is kiln " + plan::kKilnVersion +
                                       " (same plan format; results should match)");
  }
  logger.log(Severity::kINFO, "loaded plan: " + std::to_string(p.layers.size()) + " layers, " +
                                  std::to_string(p.profiles.size()) + " optimization profile(s)");
  return std::make_shared<const Engine>(loadEngine(std::move(p), std::move(owner)));
}

}  // namespace

std::shared_ptr<const void> mapPlanFile(const std::string& path, size_t& size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error(ErrorCode::kIoError, path + ": cannot open the plan file: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorCode::kIoError, path + ": cannot read the plan file (not a regular file)");
  }
  size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return std::shared_ptr<const void>(std::make_shared<char>(0));  // readPlan reports it truncated
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED)
    throw Error(ErrorCode::kIoError, path + ": cannot map the plan file: " + std::strerror(errno));
  return std::shared_ptr<const void>(
      p, [size](const void* q) { ::munmap(const_cast<void*>(q), size); });
}

Result<std::shared_ptr<const Engine>> Runtime::deserializeEngine(const void* data,
                                                                 size_t size) const {
  return guardResult<std::shared_ptr<const Engine>>(&logger_, [&] {
    return loadPlanBytes(logger_, data, size, nullptr, plan::PackedCheck::kVerify);
  });
}

Result<std::shared_ptr<const Engine>> Runtime::deserializeEngineFromFile(
    const std::string& path) const {
  std::shared_ptr<const void> mapping;
  size_t size = 0;
  Status mapped = guardStatus(nullptr, [&] { mapping = mapPlanFile(path, size); });
  if (!mapped.ok()) {
    logger_.log(Severity::kERROR, mapped.message());
    return mapped;
  }
  auto engine = guardResult<std::shared_ptr<const Engine>>(&logger_, [&] {
    return loadPlanBytes(
        logger_, mapping.get(), size, mapping,
        verifyPackedWeights_ ? plan::PackedCheck::kVerify : plan::PackedCheck::kSkip);
  });
  if (!engine.ok()) return Status(engine.status().code(), path + ": " + engine.status().message());
  return engine;
}

}  // namespace kiln
