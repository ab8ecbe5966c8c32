#include "trace_file.h"

#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/error.h"

namespace kiln::cli {

namespace {

void writeText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text << "\n";
  out.close();
  if (!out) throw Error(ErrorCode::kIoError, path + ": cannot write the file");
}

}  // namespace

void writeTraceFile(const std::string& path, const std::vector<TraceEvent>& events) {
  writeText(path, chromeTraceJson(events, static_cast<int>(::getpid())));
}

void writeRunTimes(const std::string& path, const std::vector<RunTime>& runs) {
  nlohmann::json times = nlohmann::json::array();
  for (const RunTime& run : runs) {
    auto ms = [&](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration<double, std::milli>(t - runs.front().start).count();
    };
    const double latency = std::chrono::duration<double, std::milli>(run.end - run.start).count();
    times.push_back({{"startMs", ms(run.start)},
                     {"endMs", ms(run.end)},
                     {"latencyMs", latency},
                     {"computeMs", latency}});
  }
  writeText(path, times.dump(2));
}

}  // namespace kiln::cli
