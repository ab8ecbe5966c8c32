#include "precision_builds.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "build/file_calibrator.h"
#include "cli_logger.h"
#include "commands.h"
#include "compare_report.h"
#include "ir/precision.h"
#include "kiln/builder.h"
#include "kiln/onnx_parser.h"
#include "network_options.h"

namespace kiln::cli {

namespace {

// What one build is asked for.
struct BuildRequest {
  bool reduced = false;  // the options' bf16 / int8, else FP32
  std::vector<std::string> marked;
  bool markAll = false;
  std::string layerPrecisions;
};

class PrecisionBuilder {
 public:
  PrecisionBuilder(std::string model, const PrecisionBuildOptions& opts, int threads)
      : model_(std::move(model)), opts_(opts), threads_(threads) {}

  /// Inputs from the options, made once for every build (the model's dynamic dims take their
  /// shapes).
  NamedTensors makeInputsFor(const InputOptions& in) {
    SessionOptions plain;
    plain.optimize = false;
    return makeInputs(*openModel(model_, plain), in);
  }

  std::unique_ptr<Runner> build(const BuildRequest& request, const NamedTensors& inputs) {
    auto builder = createBuilder(logger_);
    auto network = builder->createNetwork();
    OnnxParser parser(*network, logger_);
    checkStatus(parser.parseFromFile(model_));
    markNetworkOutputs(*network, request.marked, request.markAll);
    BuilderConfig config;
    config.setThreads(threads_);
    std::unique_ptr<build::FileCalibrator> calibrator;
    if (request.reduced && opts_.bf16) config.setFlag(BuilderFlag::kBF16);
    if (request.reduced && opts_.int8) {
      config.setFlag(BuilderFlag::kINT8);
      calibrator =
          std::make_unique<build::FileCalibrator>(fileCalibratorOptions(opts_.calibration));
      config.setInt8Calibrator(calibrator.get());
    }
    if (request.reduced && !request.layerPrecisions.empty()) {
      config.setFlag(BuilderFlag::kPREFER_PRECISION_CONSTRAINTS);
      setLayerPrecisions(*network, request.layerPrecisions);
    }
    OptimizationProfile profile;
    for (const auto& [name, tensor] : inputs)
      for (auto which :
           {OptProfileSelector::kMIN, OptProfileSelector::kOPT, OptProfileSelector::kMAX})
        profile.setDimensions(name, which, tensor.shape());
    config.addOptimizationProfile(profile);
    auto plan = builder->buildSerializedNetwork(*network, config);
    if (!plan.ok()) throw errorFromStatus(plan.status());
    auto engine = Runtime(logger_).deserializeEngine(plan->data(), plan->size());
    if (!engine.ok()) throw errorFromStatus(engine.status());
    return engineRunner(*engine);
  }

  /// The Conv, MatMul and Gemm layers (those a reduced precision changes), in network order.
  std::vector<std::string> eligibleLayers() {
    auto network = createBuilder(logger_)->createNetwork();
    OnnxParser parser(*network, logger_);
    checkStatus(parser.parseFromFile(model_));
    std::vector<std::string> names;
    for (int i = 0; i < network->getNbLayers(); ++i) {
      const std::string& type = network->getLayer(i)->getType();
      if (type == "Conv" || type == "MatMul" || type == "Gemm")
        names.push_back(network->getLayer(i)->getName());
    }
    return names;
  }

  std::string precisionName() const { return opts_.int8 ? "int8" : "bf16"; }

 private:
  std::string model_;
  const PrecisionBuildOptions& opts_;
  int threads_;
  CliLogger logger_;
};

// The user's --layer-precisions (NAME:TYPE,...) with each of `pinned` set to fp32 instead.
std::string withPinned(const std::string& layerPrecisions, const std::vector<std::string>& pinned) {
  std::string text;
  std::stringstream entries(layerPrecisions);
  for (std::string entry; std::getline(entries, entry, ',');) {
    const std::string name = entry.substr(0, entry.rfind(':'));
    if (std::find(pinned.begin(), pinned.end(), name) == pinned.end())
      text += (text.empty() ? "" : ",") + entry;
  }
  for (const std::string& name : pinned)
    text += (text.empty() ? "" : ",") + name + ":" + ir::kPrecisionFp32;
  return text;
}

}  // namespace

void addPrecisionBuildOptions(CLI::App& cmd, PrecisionBuildOptions& opts) {
  cmd.add_flag("--bf16", opts.bf16, "compare a BF16 build (kiln build --bf16) with an FP32 build");
  cmd.add_flag(
      "--int8", opts.int8,
      "compare an INT8 build (kiln build --int8, needs calibration data) with an FP32 build");
  cmd.add_option("--layer-precisions", opts.layerPrecisions,
                 "NAME:TYPE,...: per-layer precision of the reduced build, as kiln build takes it");
  addCalibrationOptions(cmd, opts.calibration);
}

ComparedRuns runPrecisionBuilds(const std::string& model, const PrecisionBuildOptions& opts,
                                const std::vector<std::string>& marked, const InputOptions& in,
                                int threads) {
  if (opts.bf16 && opts.int8)
    throw Error(ErrorCode::kInvalidArgument, "give --bf16 or --int8, not both");
  PrecisionBuilder builder(model, opts, threads);
  NamedTensors inputs = builder.makeInputsFor(in);
  const bool all = marked.empty();
  ComparedRuns out;
  out.reference = builder.build({false, marked, all, ""}, inputs)->run(inputs);
  out.tested = builder.build({true, marked, all, opts.layerPrecisions}, inputs)->run(inputs);
  out.referenceName = "kiln plan, fp32";
  out.testedName =
      "kiln plan, " + builder.precisionName() +
      (opts.layerPrecisions.empty() ? "" : " (--layer-precisions " + opts.layerPrecisions + ")");
  return out;
}

nlohmann::json bisectPrecisions(const std::string& model, const PrecisionBuildOptions& opts,
                                const std::vector<std::string>& marked, const InputOptions& in,
                                int threads, const Tolerance& tolerance) {
  PrecisionBuilder builder(model, opts, threads);
  NamedTensors inputs = builder.makeInputsFor(in);
  // The verdict is the model's own outputs (and any --outputs), not every tensor.
  const NamedTensors reference = builder.build({false, marked, false, ""}, inputs)->run(inputs);
  int builds = 0;
  auto passes = [&](const std::vector<std::string>& pinned) {
    ++builds;
    auto runner =
        builder.build({true, marked, false, withPinned(opts.layerPrecisions, pinned)}, inputs);
    return compareOutputs(runner->run(inputs), reference, {}, tolerance).passed();
  };
  const std::vector<std::string> layers = builder.eligibleLayers();
  nlohmann::json result = {{"precision", builder.precisionName()}, {"candidates", layers}};
  std::vector<std::string> keep = layers;
  const bool found = passes(keep);
  if (found) {
    // Drops each layer in turn while the outputs still pass: no single layer of the result can
    // go back to the reduced precision (a 1-minimal set, as delta debugging finds).
    for (const std::string& name : layers) {
      std::vector<std::string> trial;
      std::copy_if(keep.begin(), keep.end(), std::back_inserter(trial),
                   [&](const std::string& n) { return n != name; });
      if (passes(trial)) keep = std::move(trial);
    }
  }
  result["found"] = found;
  result["fp32_layers"] = found ? keep : std::vector<std::string>{};
  result["builds"] = builds;
  result["layer_precisions"] = found ? withPinned(opts.layerPrecisions, keep) : "";
  return result;
}

void printBisect(std::ostream& out, const nlohmann::json& result) {
  const auto& candidates = result["candidates"];
  if (!result["found"].get<bool>()) {
    out << "bisect: the outputs fail even with all " << candidates.size()
        << " Conv/MatMul/Gemm layers in fp32\n";
    return;
  }
  const auto& keep = result["fp32_layers"];
  out << "bisect: " << keep.size() << " of " << candidates.size()
      << " Conv/MatMul/Gemm layers must stay fp32 for the "
      << "outputs to pass (" << result["builds"].get<int>() << " builds):";
  for (const auto& name : keep) out << " " << name.get<std::string>();
  out << "\n  kiln build --" << result["precision"].get<std::string>() << " --layer-precisions "
      << result["layer_precisions"].get<std::string>() << "\n";
}

}  // namespace kiln::cli
