// What an ExecutionContext holds: per-run state over a shared, immutable engine. A Session runs
// its engine through these too (bindTensor / clearInputs), so both workflows share one path.
#pragma once
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/thread_pool.h"
#include "engine/engine_impl.h"

namespace kiln {

struct ExecutionContext::Impl {
  std::shared_ptr<const Engine::Impl> engine;
  int profile = 0;
  std::vector<std::optional<Shape>> shapes;  // per I/O tensor: input shapes set by the user
  std::vector<void*> addresses;
  std::vector<uint64_t> capacities;
  std::vector<Tensor> boundInputs;
  std::vector<Tensor> outputs;            // per I/O tensor: outputs of the last run
  std::vector<Shape> lastRunInputShapes;  // per I/O tensor
  // Kept from run to run so that a run at unchanged shapes allocates nothing of its own.
  std::vector<std::pair<int, Tensor>> feeds;
  std::vector<Shape> runShapes;  // per I/O tensor
  std::vector<OutputBuffer> buffers;
  std::vector<Tensor> results;
  std::shared_future<Status> pending;
  /// Made on the first run with `threads` threads (-1: the engine's), or given (shared by the
  /// contexts of a Session: a pool runs a second caller's loops inline).
  std::shared_ptr<cpu::ThreadPool> pool;
  int threads = -1;
  ExecutorMemory memory;  // the arena, planned again when input shapes change
  IProfiler* profiler = nullptr;
  uint64_t allocationLimit = 0;  // setAllocationLimit; 0: physical memory

  explicit Impl(std::shared_ptr<const Engine::Impl> engine);
  const plan::Plan& plan() const { return engine->plan; }
  size_t io(const std::string& name, const char* what) const;
  std::string dimsText(const Shape& dims) const;
  void checkShape(size_t index, const Shape& shape) const;
  Shape inputShape(size_t index) const;  // the shape an input will run with
  void checkShapeValues(size_t index, const Tensor& t) const;
  /// Binds I/O tensor `index` (an input) to `tensor` without checks (the caller checked it).
  void bindTensor(size_t index, const Tensor& tensor);
  /// Drops every input binding and the last outputs (so the context keeps no caller's tensor).
  void clearBindings();
  void run();
};

}  // namespace kiln
