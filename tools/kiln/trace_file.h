// `kiln bench --trace FILE` and `--export-times FILE`: the timed runs as a Chrome-trace / Perfetto
// JSON (one event per layer per run, and one per run) and as trtexec's per-run times.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "engine/trace_profiler.h"

namespace kiln::cli {

/// One timed run: when it started and ended.
struct RunTime {
  std::chrono::steady_clock::time_point start, end;
};

/// Writes the events as a Chrome trace (engine/trace_profiler.h); throws naming the file.
void writeTraceFile(const std::string& path, const std::vector<TraceEvent>& events);

/// Writes [{"startMs", "endMs", "latencyMs", "computeMs"}, ...], one per run, times in ms since
/// the first run started (as trtexec --exportTimes; on the CPU compute is the whole latency).
void writeRunTimes(const std::string& path, const std::vector<RunTime>& runs);

}  // namespace kiln::cli
