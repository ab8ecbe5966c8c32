// kiln build MODEL.onnx -o MODEL.kiln [--shapes NAME:DIMS]...
// [--min-shapes/--opt-shapes/--max-shapes NAME:DIMS]...
//                                     [--fp16] [--bf16] [--int8] [--no-nchwc] [--threads N]
//                                     [--workspace MiB]
//                                     [--layer-precisions NAME:TYPE,...] [--precision-constraints
//                                     obey|prefer]
//                                     [--verbose] [--plugins LIB.so]... [--calibration-data
//                                     DIR|FILE.npz] [--calib FILE]
//                                     [--calibration-method entropy|minmax|percentile]
//                                     [--percentile P]
//                                     [--outputs NAME,...] [--mark-all]
//                                     [--builder-optimization-level 0..5] [--timing-cache FILE]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>

#include "calibration_options.h"
#include "cli_logger.h"
#include "commands.h"
#include "kiln/builder.h"
#include "kiln/engine.h"
#include "kiln/onnx_parser.h"
#include "memory_limit_option.h"
#include "model_runner.h"
#include "network_options.h"
#include "plugin_options.h"
#include "replace_file.h"
#include "tensor_summary.h"
#include "timing_cache_file.h"

namespace kiln::cli {

namespace {

struct BuildOptions {
  std::string model;
  std::string output;
  std::vector<std::string> shapes, minShapes, optShapes, maxShapes;
  bool fp16 = false;
  bool bf16 = false;
  bool int8 = false;
  std::string layerPrecisions;  // trtexec's --layerPrecisions syntax
  std::string
      precisionConstraints;  // "obey", "prefer" or "" (prefer when layerPrecisions is given)
  bool noNchwc = false;
  int threads = 0;
  double workspaceMiB = 0;
  double memoryLimitMiB = kMemoryLimitNotGiven;
  bool verbose = false;
  int optimizationLevel = 3;  // BuilderConfig::setBuilderOptimizationLevel
  std::string timingCache;    // file read (when present) and written back
  std::vector<std::string> plugins;
  CalibrationOptions calibration;
  MarkOptions marked;  // intermediate tensors made outputs of the plan
};

std::string mib(uint64_t bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(bytes < (10u << 20) ? 2 : 1)
     << static_cast<double>(bytes) / (1 << 20) << " MiB";
  return os.str();
}

void printStage(int index, const std::string& name, double ms, const std::string& summary) {
  std::cout << "[" << index << "/5] " << std::left << std::setw(15) << name << std::right
            << std::fixed << std::setprecision(1) << std::setw(9) << ms << " ms  " << summary
            << "\n"
            << std::defaultfloat;
}

// --bf16, --layer-precisions and --precision-constraints on the config and the network's layers.
void applyPrecisionOptions(const BuildOptions& opts, NetworkDefinition& network,
                           BuilderConfig& config) {
  if (opts.bf16) config.setFlag(BuilderFlag::kBF16);
  const std::string& constraints = opts.precisionConstraints;
  if (constraints == "obey") {
    config.setFlag(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS);
  } else if (constraints == "prefer" || (constraints.empty() && !opts.layerPrecisions.empty())) {
    config.setFlag(BuilderFlag::kPREFER_PRECISION_CONSTRAINTS);
  } else if (!constraints.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                "--precision-constraints takes obey or prefer, not '" + constraints + "'");
  }
  if (!opts.layerPrecisions.empty()) setLayerPrecisions(network, opts.layerPrecisions);
}

OptimizationProfile profileFromOptions(const BuildOptions& opts) {
  auto fixed = parseShapeOptions(opts.shapes);
  std::map<std::string, Shape> ranges[3] = {parseShapeOptions(opts.minShapes),
                                            parseShapeOptions(opts.optShapes),
                                            parseShapeOptions(opts.maxShapes)};
  static const char* flags[3] = {"--min-shapes", "--opt-shapes", "--max-shapes"};
  std::set<std::string> names;
  for (const auto& m : ranges)
    for (const auto& kv : m) names.insert(kv.first);
  OptimizationProfile profile;
  for (const auto& [name, shape] : fixed) {
    if (names.count(name)) {
      throw Error(ErrorCode::kInvalidArgument,
                  "input '" + name + "' is given both --shapes and a min/opt/max range");
    }
    for (int k = 0; k < 3; ++k)
      profile.setDimensions(name, static_cast<OptProfileSelector>(k), shape);
  }
  for (const std::string& name : names) {
    for (int k = 0; k < 3; ++k) {
      auto it = ranges[k].find(name);
      if (it == ranges[k].end()) {
        throw Error(ErrorCode::kInvalidArgument,
                    "input '" + name + "' needs " + flags[k] + " too (give all of " +
                        "--min-shapes, --opt-shapes and --max-shapes, or --shapes)");
      }
      profile.setDimensions(name, static_cast<OptProfileSelector>(k), it->second);
    }
  }
  return profile;
}

int buildPlan(const BuildOptions& opts) {
  loadPlugins(opts.plugins);
  CliLogger logger(opts.verbose);
  auto builder = createBuilder(logger);
  auto network = builder->createNetwork();
  auto start = std::chrono::steady_clock::now();
  OnnxParser parser(*network, logger);
  Status parsed = parser.parseFromFile(opts.model);
  if (!parsed.ok()) {
    std::string message = parsed.message();
    if (parser.getNbErrors() > 1) {
      message = std::to_string(parser.getNbErrors()) + " errors:";
      for (int i = 0; i < parser.getNbErrors(); ++i)
        message += " [" + parser.getError(i).toString() + "]";
    }
    throw errorFromStatus(Status(parsed.code(), message));
  }
  markNetworkOutputs(*network, opts.marked.names, opts.marked.all);
  double parseMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  printStage(1, "parse", parseMs,
             opts.model + ": " + std::to_string(network->getNbLayers()) + " layers");

  BuilderConfig config;
  config.setThreads(opts.threads);
  config.setMemoryPoolLimit(static_cast<uint64_t>(opts.workspaceMiB * (1 << 20)));
  config.setAllocationLimit(memoryLimitBytes(opts.memoryLimitMiB));
  if (opts.fp16) config.setFlag(BuilderFlag::kFP16);
  if (opts.int8) config.setFlag(BuilderFlag::kINT8);
  std::unique_ptr<build::FileCalibrator> calibrator;
  if (!opts.calibration.data.empty() || !opts.calibration.cache.empty()) {
    if (!opts.int8)
      throw Error(ErrorCode::kInvalidArgument, "--calibration-data and --calib need --int8");
    calibrator = std::make_unique<build::FileCalibrator>(fileCalibratorOptions(opts.calibration));
    config.setInt8Calibrator(calibrator.get());
  }
  if (opts.noNchwc) config.setFlag(BuilderFlag::kDISABLE_NCHWC_LAYOUT);
  applyPrecisionOptions(opts, *network, config);
  OptimizationProfile profile = profileFromOptions(opts);
  if (!profile.inputNames().empty()) config.addOptimizationProfile(profile);
  config.setBuilderOptimizationLevel(opts.optimizationLevel);
  std::unique_ptr<ITimingCache> cache;
  if (!opts.timingCache.empty()) {
    cache = readTimingCacheFile(opts.timingCache, logger);
    config.setTimingCache(cache.get());
  }

  BuildReport report;
  auto plan = builder->buildSerializedNetwork(*network, config, &report);
  for (size_t i = 0; i < report.stages.size(); ++i) {
    const auto& s = report.stages[i];
    printStage(static_cast<int>(i) + 2, s.name, s.milliseconds, s.summary);
    // INT8 decisions (ranges chosen, layers left float) after the optimize stage that made them.
    const bool int8Stage = s.name == "optimize";
    if (int8Stage || s.name == "select kernels")
      for (const std::string& line : logger.decisions)
        if ((line.rfind("int8: ", 0) == 0) == int8Stage) std::cout << "        " << line << "\n";
  }
  if (calibrator && !calibrator->cacheWriteError().empty())
    logger.log(Severity::kWARNING, calibrator->cacheWriteError());
  if (!plan.ok()) throw errorFromStatus(plan.status());
  replaceFile(opts.output, *plan, "plan");  // an engine mapping the old plan keeps the old file
  if (cache) writeTimingCacheFile(opts.timingCache, *cache);
  double totalMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::cout << "built " << opts.output << ": " << report.layersBefore << " layers -> "
            << report.layersAfter << " after optimization, arena " << mib(report.arenaBytes)
            << " (intermediates sum " << mib(report.intermediateBytes) << "), plan "
            << mib(report.planBytes) << " in " << std::fixed << std::setprecision(1) << totalMs
            << " ms\n";
  return 0;
}

}  // namespace

Error errorFromStatus(const Status& status) {
  return Error(status.ok() ? ErrorCode::kInternalError : status.code(), status.message());
}

bool isPlanFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  in.read(magic, sizeof(magic));
  return in.gcount() == 8 && std::memcmp(magic, "KILNPLAN", 8) == 0;
}

std::shared_ptr<const Engine> loadPlanFile(const std::string& path, ILogger& logger) {
  auto engine = Runtime(logger).deserializeEngineFromFile(path);
  if (!engine.ok()) throw errorFromStatus(engine.status());
  return *engine;
}

Action addBuildCommand(CLI::App& app) {
  auto opts = std::make_shared<BuildOptions>();
  CLI::App* cmd = app.add_subcommand("build", "Build an engine plan (.kiln) from an ONNX model");
  cmd->add_option("model", opts->model, "ONNX model file")->required();
  cmd->add_option("-o,--output", opts->output, "plan file to write")->required();
  cmd->add_option("--shapes", opts->shapes,
                  "NAME:1x3x224x224: fixed shape of a dynamic input (repeatable)");
  cmd->add_option("--min-shapes", opts->minShapes,
                  "NAME:DIMS: smallest shape of a dynamic input (repeatable)");
  cmd->add_option("--opt-shapes", opts->optShapes,
                  "NAME:DIMS: typical shape of a dynamic input (repeatable)");
  cmd->add_option("--max-shapes", opts->maxShapes,
                  "NAME:DIMS: largest shape of a dynamic input (repeatable)");
  cmd->add_flag("--fp16", opts->fp16,
                "keep the weights of MatMul, Gemm and Linear layers in FP16 (half the bytes; "
                "computed in FP32)");
  cmd->add_flag("--bf16", opts->bf16,
                "run Conv, MatMul and Gemm layers in BF16 with FP32 sums (AVX512_BF16; else FP32, "
                "with a warning)");
  cmd->add_option("--layer-precisions", opts->layerPrecisions,
                  "NAME:TYPE,...: per-layer precision (fp32, bf16, fp16, int8), e.g. fc:fp32 keeps "
                  "layer fc in FP32");
  cmd->add_option("--precision-constraints", opts->precisionConstraints,
                  "obey (an error when a layer's precision cannot be met) or prefer (the default "
                  "with --layer-precisions)");
  cmd->add_flag(
      "--int8", opts->int8,
      "allow INT8 layers: with calibration data or a cache, Conv/MatMul/Gemm are quantized");
  cmd->add_flag("--no-nchwc", opts->noNchwc,
                "keep every tensor NCHW (no blocked-layout convolutions), to compare");
  cmd->add_option("--threads", opts->threads,
                  "intra-op threads of the engine's contexts (0 = one per hardware thread)");
  cmd->add_option("--workspace", opts->workspaceMiB, "activation memory limit in MiB (0 = none)");
  addMemoryLimitOption(cmd, &opts->memoryLimitMiB,
                       "the largest single tensor the profiles' shapes may need");
  cmd->add_option("--builder-optimization-level", opts->optimizationLevel,
                  "0 = heuristic kernel choices (no timing); 1..5 = time each conv / GEMM / MatMul "
                  "layer's candidate "
                  "kernels and keep the fastest, more timed runs at higher levels (default 3)")
      ->check(CLI::Range(0, 5));
  cmd->add_option(
      "--timing-cache", opts->timingCache,
      "FILE: tactic times of earlier builds, read if it exists and written back after the build");
  cmd->add_flag("--verbose", opts->verbose, "print each layer's decisions");
  addPluginOption(*cmd, opts->plugins);
  addCalibrationOptions(*cmd, opts->calibration);
  addMarkOptions(*cmd, opts->marked);
  return [opts] { return buildPlan(*opts); };
}

}  // namespace kiln::cli
