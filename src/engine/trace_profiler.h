// Collects each layer's time of every run as Chrome-trace events: InferenceSession.end_profiling
// (python/src/session.cpp) and `kiln bench --trace` (tools/kiln/trace_file.cpp) write them.
#pragma once
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "core/internal_api.h"
#include "kiln/profiler.h"

namespace kiln {

/// One Chrome-trace "complete" event: a layer's kernel or a whole run.
struct TraceEvent {
  std::string name;
  std::string category;  // "Node" or "Session"
  std::string opType;    // the layer's op type ("" for a run)
  std::string shapes;    // the layer's input shapes
  std::string kernel;    // the kernel candidate that ran it ("" for a run)
  double startUs = 0;    // since the profiler was made
  double durationUs = 0;
  int thread = 0;
};

class KILN_INTERNAL_API TraceProfiler : public IProfiler {
 public:
  void reportLayerTime(const LayerTiming& timing) override;
  /// Records a whole run that started at `start`, ending now.
  void recordRun(std::chrono::steady_clock::time_point start);
  /// The events so far, in the order they ended; clears them.
  std::vector<TraceEvent> take();

 private:
  void add(TraceEvent event, std::chrono::steady_clock::time_point end, double durationUs);
  const std::chrono::steady_clock::time_point origin_ = std::chrono::steady_clock::now();
  std::mutex mutex_;
  std::vector<TraceEvent> events_;
};

/// The events as a Chrome-trace / Perfetto JSON array of "complete" events (ph "X", ts and dur in
/// microseconds, tid the thread's number, pid `pid`); a layer's args hold op_name, input_shapes
/// and kernel.
KILN_INTERNAL_API std::string chromeTraceJson(const std::vector<TraceEvent>& events, int pid);

}  // namespace kiln
