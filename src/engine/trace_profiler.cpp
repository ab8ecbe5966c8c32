#include "engine/trace_profiler.h"

#include <atomic>
#include <nlohmann/json.hpp>
#include <utility>

namespace kiln {

namespace {

// A small, stable number per thread for the trace's "tid".
int threadNumber() {
  static std::atomic<int> next{0};
  thread_local const int number = next++;
  return number;
}

}  // namespace

void TraceProfiler::add(TraceEvent event, std::chrono::steady_clock::time_point end,
                        double durationUs) {
  event.durationUs = durationUs;
  event.startUs = std::chrono::duration<double, std::micro>(end - origin_).count() - durationUs;
  event.thread = threadNumber();
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(event));
}

void TraceProfiler::reportLayerTime(const LayerTiming& timing) {
  add(TraceEvent{timing.name, "Node", timing.opType, timing.shapes, timing.kernel},
      std::chrono::steady_clock::now(), timing.ms * 1000.0);
}

void TraceProfiler::recordRun(std::chrono::steady_clock::time_point start) {
  const auto end = std::chrono::steady_clock::now();
  add(TraceEvent{"model_run", "Session"}, end,
      std::chrono::duration<double, std::micro>(end - start).count());
}

std::vector<TraceEvent> TraceProfiler::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(events_, {});
}

std::string chromeTraceJson(const std::vector<TraceEvent>& events, int pid) {
  nlohmann::json trace = nlohmann::json::array();
  for (const TraceEvent& e : events) {
    nlohmann::json args = nlohmann::json::object();
    if (!e.opType.empty())
      args = {{"op_name", e.opType}, {"input_shapes", e.shapes}, {"kernel", e.kernel}};
    trace.push_back({{"cat", e.category},
                     {"name", e.name},
                     {"ph", "X"},
                     {"ts", e.startUs},
                     {"dur", e.durationUs},
                     {"pid", pid},
                     {"tid", e.thread},
                     {"args", args}});
  }
  return trace.dump();
}

}  // namespace kiln
