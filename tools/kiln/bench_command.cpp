// kiln bench MODEL|PLAN [--threads N] [--warmup N] [--iterations N] [--shapes ...] [--json]
// [--no-nchwc]
//                      [--profile] [--trace FILE.json] [--export-times FILE.json]:
// latency statistics over repeated runs on the same inputs, like trtexec's summary.
// With --serve it becomes a persistent worker for the bench/ harness (see bench_serve.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "bench_serve.h"
#include "commands.h"
#include "layer_profile.h"
#include "model_runner.h"
#include "plugin_options.h"
#include "trace_file.h"

namespace kiln::cli {

namespace {

struct BenchOptions {
  std::string model;
  InputOptions in;
  int threads = 0;
  int warmup = 5;
  int iterations = 30;
  bool json = false;
  bool serve = false;
  bool profile = false;
  bool noNchwc = false;
  std::string trace;        // Chrome-trace JSON of the timed runs
  std::string exportTimes;  // per-run times, as trtexec --exportTimes
  std::vector<std::string> plugins;
};

// Tells every profiler given (--profile's table, --trace's events) each layer's time.
class Profilers : public IProfiler {
 public:
  explicit Profilers(std::vector<IProfiler*> profilers) : profilers_(std::move(profilers)) {}
  void reportLayerTime(const LayerTiming& timing) override {
    for (IProfiler* p : profilers_) p->reportLayerTime(timing);
  }
  bool empty() const { return profilers_.empty(); }

 private:
  std::vector<IProfiler*> profilers_;
};

// The value below which `fraction` of the sorted samples lie (nearest rank).
double percentile(const std::vector<double>& sorted, double fraction) {
  size_t rank = static_cast<size_t>(std::ceil(fraction * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

int benchModel(const BenchOptions& opts) {
  if (opts.iterations < 1 || opts.warmup < 0) {
    throw Error(ErrorCode::kInvalidArgument, "--iterations must be >= 1 and --warmup >= 0");
  }
  LayerProfile profile;
  TraceProfiler trace;
  std::vector<IProfiler*> wanted;
  if (opts.profile) wanted.push_back(&profile);
  if (!opts.trace.empty()) wanted.push_back(&trace);
  Profilers profilers(wanted);
  std::unique_ptr<Runner> runner =
      openModel(opts.model, opts.threads, profilers.empty() ? nullptr : &profilers, !opts.noNchwc);
  NamedTensors inputs = makeInputs(*runner, opts.in);
  for (int i = 0; i < opts.warmup; ++i) runner->run(inputs);
  profile.clear();
  trace.take();  // the warm-up runs' events
  std::vector<double> ms;
  std::vector<RunTime> runs;
  for (int i = 0; i < opts.iterations; ++i) {
    auto start = std::chrono::steady_clock::now();
    runner->run(inputs);
    runs.push_back({start, std::chrono::steady_clock::now()});
    if (!opts.trace.empty()) trace.recordRun(start);
    ms.push_back(std::chrono::duration<double, std::milli>(runs.back().end - start).count());
  }
  if (!opts.trace.empty()) writeTraceFile(opts.trace, trace.take());
  if (!opts.exportTimes.empty()) writeRunTimes(opts.exportTimes, runs);
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  const double median = percentile(sorted, 0.5);
  nlohmann::json stats = {{"model", opts.model},
                          {"threads", opts.threads},
                          {"warmup", opts.warmup},
                          {"iterations", opts.iterations},
                          {"min_ms", sorted.front()},
                          {"median_ms", median},
                          {"mean_ms", mean},
                          {"p90_ms", percentile(sorted, 0.9)},
                          {"p99_ms", percentile(sorted, 0.99)},
                          {"max_ms", sorted.back()},
                          {"throughput_per_s", 1000.0 / mean}};
  if (opts.profile) stats["layers"] = profile.toJson(opts.iterations);
  if (opts.json) {
    std::cout << stats.dump(2) << "\n";
    return 0;
  }
  printModelSummary(*runner, opts.model);
  std::cout << std::fixed << std::setprecision(3) << "latency over " << opts.iterations
            << " runs after " << opts.warmup << " warm-up: min " << sorted.front() << " ms, median "
            << median << " ms, mean " << mean << " ms, p90 " << percentile(sorted, 0.9)
            << " ms, p99 " << percentile(sorted, 0.99) << " ms, max " << sorted.back()
            << " ms\nthroughput " << std::setprecision(2) << 1000.0 / mean << " inferences/s\n";
  if (opts.profile) profile.print(std::cout, opts.iterations, 30);
  return 0;
}

}  // namespace

Action addBenchCommand(CLI::App& app) {
  auto opts = std::make_shared<BenchOptions>();
  CLI::App* cmd =
      app.add_subcommand("bench", "Time repeated runs of a model and report latency statistics");
  cmd->add_option("model", opts->model, "ONNX model file or kiln plan")->required();
  addInputOptions(*cmd, opts->in);
  cmd->add_option("--threads", opts->threads,
                  "intra-op threads (0 = one per hardware thread; for a plan, 0 keeps the count it "
                  "was built with)");
  cmd->add_option("--warmup", opts->warmup, "untimed runs first (default 5)");
  cmd->add_option("--iterations", opts->iterations, "timed runs (default 30)");
  cmd->add_flag("--json", opts->json, "print the statistics as JSON");
  cmd->add_flag("--no-nchwc", opts->noNchwc,
                "keep every tensor NCHW (no blocked-layout convolutions), to compare");
  cmd->add_flag(
      "--profile", opts->profile,
      "time every layer during the timed runs; print the slowest layers and the time per operator");
  cmd->add_option("--trace", opts->trace,
                  "FILE.json: write the timed runs as a Chrome trace / Perfetto JSON (one event "
                  "per layer per run, "
                  "with op, input shapes and kernel, and one per run)");
  cmd->add_option(
      "--export-times", opts->exportTimes,
      "FILE.json: write each timed run's start, end and latency in ms (as trtexec --exportTimes)");
  cmd->add_flag("--serve", opts->serve,
                "worker mode for bench/run_bench.py: read 'load', 'run K', 'quit' from stdin, "
                "print JSON lines");
  addPluginOption(*cmd, opts->plugins);
  return [opts] {
    loadPlugins(opts->plugins);
    return opts->serve ? serveBench(opts->model, opts->threads, opts->in) : benchModel(*opts);
  };
}

}  // namespace kiln::cli
