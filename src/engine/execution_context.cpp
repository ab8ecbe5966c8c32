// ExecutionContext: per-run state over a shared, immutable Engine (input shapes within the
// optimization profile, bound buffers, the last outputs).
#include <chrono>
#include <cstring>
#include <optional>

#include "core/tensor_limits.h"
#include "engine/api_guard.h"
#include "engine/execution_context_impl.h"

namespace kiln {

namespace {
[[noreturn]] void badArgument(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, message);
}
}  // namespace

size_t ExecutionContext::Impl::io(const std::string& name, const char* what) const {
  int i = engine->findIO(name);
  if (i < 0) {
    std::string names;
    for (const auto& t : plan().io) names += (names.empty() ? "" : ", ") + t.name;
    badArgument(std::string(what) + ": '" + name +
                "' is not an input or output of the engine (it has: " + names + ")");
  }
  return static_cast<size_t>(i);
}

std::string ExecutionContext::Impl::dimsText(const Shape& dims) const {
  if (dims.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? "x" : "") + (dims[i] < 0 ? std::string("?") : std::to_string(dims[i]));
  return s;
}

// Rejects a shape that disagrees with a fixed dim or lies outside the current profile.
void ExecutionContext::Impl::checkShape(size_t index, const Shape& shape) const {
  const plan::IOTensor& t = plan().io[index];
  if (t.mode != TensorIOMode::kINPUT)
    badArgument("'" + t.name + "' is an output; only input shapes can be set");
  const plan::ProfileEntry* range =
      plan().profiles.empty() ? nullptr
                              : plan().profiles[static_cast<size_t>(profile)].find(t.name);
  if (t.hasShape && shape.size() != t.dims.size()) {
    badArgument("input '" + t.name + "' has rank " + std::to_string(shape.size()) + " (shape " +
                shapeToString(shape) + ") but the engine expects rank " +
                std::to_string(t.dims.size()) + " (shape " + dimsText(t.dims) + ")");
  }
  std::string bad;
  bool outsideProfile = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    std::string problem;
    if (shape[i] < 0) {
      problem = "got " + std::to_string(shape[i]) + ", expected a dim >= 0";
    } else if (t.hasShape && t.dims[i] >= 0 && shape[i] != t.dims[i]) {
      problem = "got " + std::to_string(shape[i]) + ", expected " + std::to_string(t.dims[i]);
    } else if (range && range->dims[0].size() == shape.size() &&
               (shape[i] < range->dims[0][i] || shape[i] > range->dims[2][i])) {
      problem = "got " + std::to_string(shape[i]) + ", expected " +
                std::to_string(range->dims[0][i]) + ".." + std::to_string(range->dims[2][i]) +
                " (optimization profile " + std::to_string(profile) + ")";
      outsideProfile = true;
    }
    if (!problem.empty())
      bad += (bad.empty() ? "" : "; ") + std::string("index ") + std::to_string(i) + ": " + problem;
  }
  if (bad.empty()) return;
  std::string expected = outsideProfile
                             ? "profile " + std::to_string(profile) + " allows " +
                                   dimsText(range->dims[0]) + " to " + dimsText(range->dims[2])
                             : "engine expects " + dimsText(t.dims);
  badArgument("input '" + t.name + "' has invalid dimensions (" + bad + "): shape given " +
              shapeToString(shape) + ", " + expected);
}

Shape ExecutionContext::Impl::inputShape(size_t index) const {
  if (boundInputs[index].defined()) return boundInputs[index].shape();
  if (shapes[index]) return *shapes[index];
  const plan::IOTensor& t = plan().io[index];
  Shape s;
  for (int64_t d : t.dims) {
    if (d < 0 || !t.hasShape) {
      badArgument("input '" + t.name + "' has dynamic dims (" + dimsText(t.dims) +
                  "); set its shape with setInputShape");
    }
    s.push_back(d);
  }
  return s;
}

void ExecutionContext::Impl::checkShapeValues(size_t index, const Tensor& t) const {
  if (plan().profiles.empty()) return;
  const plan::ProfileEntry* range =
      plan().profiles[static_cast<size_t>(profile)].find(plan().io[index].name);
  if (!range || range->values[0].empty()) return;
  if (t.numel() != static_cast<int64_t>(range->values[0].size())) {
    badArgument("shape input '" + plan().io[index].name + "' has " + std::to_string(t.numel()) +
                " values, the profile has " + std::to_string(range->values[0].size()));
  }
  std::vector<int64_t> v = t.toInt64Vector();
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < range->values[0][i] || v[i] > range->values[2][i]) {
      badArgument("shape input '" + plan().io[index].name + "' value index " + std::to_string(i) +
                  ": got " + std::to_string(v[i]) + ", expected " +
                  std::to_string(range->values[0][i]) + ".." + std::to_string(range->values[2][i]) +
                  " (optimization profile " + std::to_string(profile) + ")");
    }
  }
}

void ExecutionContext::Impl::run() {
  const plan::Plan& p = plan();
  if (!pool) pool = std::make_shared<cpu::ThreadPool>(threads >= 0 ? threads : p.info.threads);
  AllocationLimitScope limit(allocationLimit);
  cpu::ThreadPoolScope threads(pool.get());
  runShapes.resize(p.io.size());
  size_t fed = 0;
  for (size_t i = 0; i < p.io.size(); ++i) {
    const plan::IOTensor& t = p.io[i];
    if (t.mode != TensorIOMode::kINPUT) continue;
    if (!boundInputs[i].defined() && !addresses[i]) {
      if (t.hasDefault) {
        runShapes[i].clear();
        continue;
      }
      badArgument("input '" + t.name +
                  "' has no data: bind it with setTensorAddress or setInputTensor");
    }
    if (feeds.size() <= fed) feeds.emplace_back();
    auto& [valueId, value] = feeds[fed++];
    valueId = t.valueId;
    if (boundInputs[i].defined()) {
      value = boundInputs[i];
    } else if (value.raw() != addresses[i] || value.dtype() != t.dtype ||
               value.shape() != (shapes[i] ? *shapes[i] : t.dims)) {
      // A view of the caller's buffer, made again only when the address or shape changed.
      value = Tensor::wrap(t.dtype, inputShape(i), addresses[i], nullptr);
    }
    if (!boundInputs[i].defined() && capacities[i] && capacities[i] < value.byteSize()) {
      badArgument("input '" + t.name + "' needs " + std::to_string(value.byteSize()) +
                  " bytes for shape " + shapeToString(value.shape()) + ", its buffer has " +
                  std::to_string(capacities[i]));
    }
    if (!value.isSequence() && !value.isNone()) {  // those have no shape of their own
      checkShape(i, value.shape());
      checkShapeValues(i, value);
    }
    runShapes[i] = value.shape();
  }
  feeds.resize(fed);
  // Outputs with a bound buffer are computed in it when their size is known from the input shapes;
  // the others (sizes that depend on data, views of an input) are copied there after the run.
  buffers.clear();
  for (size_t i = 0; i < p.io.size(); ++i)
    if (p.io[i].mode == TensorIOMode::kOUTPUT && addresses[i])
      buffers.push_back({p.io[i].valueId, addresses[i], capacities[i]});
  engine->executor->run(feeds, memory, buffers, profiler, results);
  size_t k = 0;
  for (size_t i = 0; i < p.io.size(); ++i) {
    if (p.io[i].mode != TensorIOMode::kOUTPUT) continue;
    outputs[i] = results.at(k++);
    if (!addresses[i]) continue;
    const Tensor& out = outputs[i];
    if (out.dtype() == DataType::kString)
      badArgument("output '" + p.io[i].name + "' holds strings; read it with getOutputTensor");
    if (capacities[i] && capacities[i] < out.byteSize()) {
      badArgument("output '" + p.io[i].name + "' " + out.describe() + " needs " +
                  std::to_string(out.byteSize()) + " bytes, its buffer has " +
                  std::to_string(capacities[i]));
    }
    if (out.raw() != addresses[i] && out.byteSize())
      std::memmove(addresses[i], out.raw(), out.byteSize());
  }
  std::swap(lastRunInputShapes, runShapes);
}

ExecutionContext::ExecutionContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ExecutionContext::~ExecutionContext() {
  if (impl_ && impl_->pending.valid()) impl_->pending.wait();
}

ExecutionContext::Impl::Impl(std::shared_ptr<const Engine::Impl> engineImpl)
    : engine(std::move(engineImpl)) {
  const size_t n = engine->plan.io.size();
  shapes.resize(n);
  addresses.assign(n, nullptr);
  capacities.assign(n, 0);
  boundInputs.resize(n);
  outputs.resize(n);
}

void ExecutionContext::Impl::bindTensor(size_t index, const Tensor& tensor) {
  boundInputs[index] = tensor;
  shapes[index] = tensor.shape();
  addresses[index] = nullptr;
}

void ExecutionContext::Impl::clearBindings() {
  for (size_t i = 0; i < boundInputs.size(); ++i) {
    boundInputs[i] = Tensor();
    shapes[i].reset();
    addresses[i] = nullptr;
    outputs[i] = Tensor();
  }
  for (auto& feed : feeds) feed.second = Tensor();
  for (Tensor& result : results) result = Tensor();
}

Result<std::unique_ptr<ExecutionContext>> Engine::createExecutionContext() const {
  return guardResult<std::unique_ptr<ExecutionContext>>(nullptr, [&] {
    return std::make_unique<ExecutionContext>(std::make_unique<ExecutionContext::Impl>(impl_));
  });
}

Status ExecutionContext::setOptimizationProfile(int index) {
  if (index < 0 || index >= static_cast<int>(impl_->plan().profiles.size())) {
    return Status(ErrorCode::kInvalidArgument, "optimization profile " + std::to_string(index) +
                                                   " does not exist (the engine has " +
                                                   std::to_string(impl_->plan().profiles.size()) +
                                                   ")");
  }
  impl_->profile = index;
  return Status();
}

int ExecutionContext::getOptimizationProfile() const { return impl_->profile; }

Status ExecutionContext::setThreads(int threads) {
  if (threads < 0)
    return Status(ErrorCode::kInvalidArgument,
                  "setThreads: threads must be >= 0 (0 = one per hardware thread)");
  if (impl_->pending.valid()) impl_->pending.wait();  // the pool may be in use by an enqueued run
  if (threads != impl_->threads) impl_->pool.reset();
  impl_->threads = threads;
  return Status();
}

void ExecutionContext::setAllocationLimit(uint64_t bytes) { impl_->allocationLimit = bytes; }
uint64_t ExecutionContext::getAllocationLimit() const { return impl_->allocationLimit; }

int ExecutionContext::getThreads() const {
  return impl_->threads >= 0 ? impl_->threads : impl_->plan().info.threads;
}

void ExecutionContext::setProfiler(IProfiler* profiler) { impl_->profiler = profiler; }
IProfiler* ExecutionContext::getProfiler() const { return impl_->profiler; }

Status ExecutionContext::setInputShape(const std::string& name, const Shape& dims) {
  return guardStatus(nullptr, [&] {
    size_t i = impl_->io(name, "setInputShape");
    impl_->checkShape(i, dims);
    impl_->shapes[i] = dims;
    impl_->boundInputs[i] = Tensor();
  });
}

Result<Shape> ExecutionContext::getTensorShape(const std::string& name) const {
  return guardResult<Shape>(nullptr, [&]() -> Shape {
    const plan::Plan& p = impl_->plan();
    size_t index = impl_->io(name, "getTensorShape");
    if (p.io[index].mode == TensorIOMode::kINPUT) {
      if (impl_->boundInputs[index].defined()) return impl_->boundInputs[index].shape();
      return impl_->shapes[index] ? *impl_->shapes[index] : p.io[index].dims;
    }
    // Resolve the output from the current input shapes with the engine's shape program, as the
    // run will (no copy of the graph).
    std::vector<Shape> current(p.io.size());
    std::vector<std::pair<int, Shape>> inputShapes;
    for (size_t i = 0; i < p.io.size(); ++i) {
      if (p.io[i].mode != TensorIOMode::kINPUT) continue;
      bool known = impl_->boundInputs[i].defined() || impl_->shapes[i] || !p.io[i].hasDefault;
      if (!known) continue;
      try {
        current[i] = impl_->inputShape(i);
      } catch (const Error&) {
        continue;  // still dynamic: its dims stay unknown
      }
      inputShapes.emplace_back(p.io[i].valueId, current[i]);
    }
    if (impl_->outputs[index].defined() && current == impl_->lastRunInputShapes)
      return impl_->outputs[index].shape();
    const ShapeProgram::Resolution resolved =
        impl_->engine->executor->shapeProgram().resolve(inputShapes);
    const ir::TypeInfo& type = resolved.types[static_cast<size_t>(p.io[index].valueId)];
    if (!type.shape) return Shape{};
    Shape dims;
    for (const ir::Dim& d : *type.shape) dims.push_back(d.isKnown() ? d.value : -1);
    return dims;
  });
}

Status ExecutionContext::setTensorAddress(const std::string& name, void* address, uint64_t bytes) {
  return guardStatus(nullptr, [&] {
    size_t i = impl_->io(name, "setTensorAddress");
    if (!address) badArgument("setTensorAddress: the address for '" + name + "' is null");
    if (impl_->plan().io[i].dtype == DataType::kString) {
      badArgument("'" + name +
                  "' holds strings; bind it with setInputTensor / read it with getOutputTensor");
    }
    impl_->addresses[i] = address;
    impl_->capacities[i] = bytes;
    impl_->boundInputs[i] = Tensor();
  });
}

Status ExecutionContext::setInputTensor(const std::string& name, const Tensor& tensor) {
  return guardStatus(nullptr, [&] {
    size_t i = impl_->io(name, "setInputTensor");
    const plan::IOTensor& t = impl_->plan().io[i];
    if (!tensor.defined()) badArgument("input '" + name + "' has no value");
    if (t.dtype != DataType::kUndefined && tensor.dtype() != t.dtype) {
      badArgument("input '" + name + "' has type " + dataTypeName(tensor.dtype()) +
                  " but the engine expects " + dataTypeName(t.dtype));
    }
    impl_->checkShape(i, tensor.shape());
    impl_->bindTensor(i, tensor);
  });
}

Result<Tensor> ExecutionContext::getOutputTensor(const std::string& name) const {
  return guardResult<Tensor>(nullptr, [&] {
    size_t i = impl_->io(name, "getOutputTensor");
    if (impl_->plan().io[i].mode != TensorIOMode::kOUTPUT)
      badArgument("'" + name + "' is not an output");
    if (!impl_->outputs[i].defined())
      badArgument("output '" + name + "' has no value yet: run execute() first");
    return impl_->outputs[i];
  });
}

Status ExecutionContext::execute() {
  return guardStatus(nullptr, [&] { impl_->run(); });
}

CompletionEvent ExecutionContext::enqueue() {
  if (impl_->pending.valid()) impl_->pending.wait();
  impl_->pending = std::async(std::launch::async, [this] { return execute(); }).share();
  return CompletionEvent(impl_->pending);
}

Status CompletionEvent::wait() const {
  if (!done_.valid()) return Status(ErrorCode::kInvalidArgument, "no inference was enqueued");
  return done_.get();
}

bool CompletionEvent::ready() const {
  return done_.valid() && done_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace kiln
