// kiln run MODEL|PLAN [--input NAME=FILE.npy|FILE.pb]... [--shapes NAME:1x3x224x224]... [--seed N]
//                    [--outputs NAME,...] [--mark-all]
//                    [--output-dir DIR] [--threads N] [--no-nchwc] [--plugins LIB.so]...
// MODEL is an ONNX file (run with Session) or a plan from `kiln build` (run with an engine).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "commands.h"
#include "kiln/npy.h"
#include "kiln/session.h"
#include "memory_limit_option.h"
#include "model_runner.h"
#include "onnx/value_proto.h"
#include "plugin_options.h"
#include "tensor_summary.h"

namespace kiln::cli {

namespace {

struct RunOptions {
  std::string model;
  InputOptions in;
  MarkOptions marked;
  std::string outputDir;
  int threads = 0;
  double memoryLimitMiB = kMemoryLimitNotGiven;
  bool noNchwc = false;
  std::vector<std::string> plugins;
};

// Whether an output goes to a .pb file: sequences, optionals, and tensors whose dtype numpy has no
// type for (bfloat16, float8, int4, ...). Everything else stays .npy.
bool needsProtoFile(const TensorInfo& info, const Tensor& value) {
  return value.isSequence() || value.isNone() || info.isSequence || info.isOptionalType ||
         value.dtype() == DataType::kBFloat16 || isLowPrecision(value.dtype());
}

// The manifest entry of one output: name, file, format ("npy" or "pb"), kind ("tensor",
// "sequence" or "optional"), dtype (a sequence's element type, a map's value type) and shape
// (tensors) or item_shapes (sequences); optionals add "present"; a sequence of maps has
// map_key_dtype and map_sizes (each map's entry count) instead of item_shapes.
nlohmann::json manifestEntry(const std::string& name, const std::string& file,
                             const TensorInfo& info, const Tensor& value, bool proto) {
  nlohmann::json entry = {{"name", name}, {"file", file}, {"format", proto ? "pb" : "npy"}};
  const bool optional = info.isOptionalType || value.isNone();
  const bool sequence =
      value.isSequence() || value.isNoneOfSequence() || (value.isNone() && info.isSequence);
  entry["kind"] = optional ? "optional" : sequence ? "sequence" : "tensor";
  entry["dtype"] = dataTypeName(value.dtype());
  if (optional) entry["present"] = !value.isNone();
  if (value.mapKeyType() != DataType::kUndefined) {
    entry["map_key_dtype"] = dataTypeName(value.mapKeyType());
    nlohmann::json sizes = nlohmann::json::array();
    for (const Tensor& map : value.sequenceItems()) sizes.push_back(map.mapKeys().numel());
    entry["map_sizes"] = sizes;
  } else if (value.isSequence()) {
    nlohmann::json shapes = nlohmann::json::array();
    for (const Tensor& item : value.sequenceItems()) shapes.push_back(item.shape());
    entry["item_shapes"] = shapes;
  } else if (!value.isNone()) {
    entry["shape"] = value.shape();
  }
  return entry;
}

// Writes each output as DIR/<name>.npy, or DIR/<name>.pb (a TensorProto, SequenceProto or
// OptionalProto) where .npy cannot hold it, and DIR/outputs.json listing them.
void writeOutputs(const NamedTensors& outputs, const std::vector<TensorInfo>& infos,
                  const std::string& dir) {
  std::filesystem::create_directories(dir);
  nlohmann::json manifest;
  manifest["outputs"] = nlohmann::json::array();
  std::set<std::string> used;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& [name, tensor] = outputs[i];
    const TensorInfo info = i < infos.size() ? infos[i] : TensorInfo{};
    const bool proto = needsProtoFile(info, tensor);
    const std::string extension = proto ? ".pb" : ".npy";
    std::string base = sanitizeFileName(name);
    std::string file = base + extension;
    for (int k = 1; used.count(file); ++k) file = base + "_" + std::to_string(k) + extension;
    used.insert(file);
    if (file != name + extension) {
      std::cout << "note: output '" << name << "' is written as " << file
                << " (name made safe for the file system)\n";
    }
    const std::string path = (std::filesystem::path(dir) / file).string();
    if (proto)
      onnx_import::writeValueFile(path, tensor, valueTypeOf(info), name);
    else
      writeNpy(path, tensor);
    manifest["outputs"].push_back(manifestEntry(name, file, info, tensor, proto));
  }
  std::ofstream(std::filesystem::path(dir) / "outputs.json") << manifest.dump(2) << "\n";
}

int runModel(const RunOptions& opts) {
  loadPlugins(opts.plugins);
  SessionOptions options;
  options.threads = opts.threads;
  options.allocationLimitBytes = memoryLimitBytes(opts.memoryLimitMiB);
  options.nchwcLayout = !opts.noNchwc;
  options.extraOutputs = opts.marked.names;
  options.markAllOutputs = opts.marked.all;
  std::unique_ptr<Runner> runner = openModel(opts.model, options);
  if (options.markAllOutputs || !options.extraOutputs.empty()) {
    std::cerr << "note: marked tensors are outputs to the optimizer: fusions that would remove one "
                 "are not made, so "
                 "each has the unfused graph's value (docs/debugging.md)\n";
  }
  printModelSummary(*runner, opts.model);
  NamedTensors inputs = makeInputs(*runner, opts.in);
  auto start = std::chrono::steady_clock::now();
  NamedTensors outputs = runner->run(inputs);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::cout << "inputs\n";
  for (const auto& [name, t] : inputs) std::cout << summarizeTensor(name, t) << "\n";
  std::cout << "outputs (" << std::fixed << std::setprecision(2) << ms << " ms)\n"
            << std::defaultfloat;
  for (const auto& [name, t] : outputs) std::cout << summarizeTensor(name, t) << "\n";
  if (!opts.outputDir.empty()) writeOutputs(outputs, runner->outputs(), opts.outputDir);
  return 0;
}

}  // namespace

Action addRunCommand(CLI::App& app) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Run a model once on given or random inputs");
  cmd->add_option("model", opts->model, "ONNX model file or kiln plan")->required();
  addInputOptions(*cmd, opts->in);
  addMarkOptions(*cmd, opts->marked);
  cmd->add_option("--output-dir", opts->outputDir,
                  "write each output as DIR/<name>.npy (sequences, optionals, bfloat16 and other "
                  "types numpy lacks: "
                  "DIR/<name>.pb) and DIR/outputs.json");
  cmd->add_option("--threads", opts->threads,
                  "intra-op threads (0 = one per hardware thread; for a plan, 0 keeps the count it "
                  "was built with)");
  addMemoryLimitOption(cmd, &opts->memoryLimitMiB,
                       "the largest single buffer (tensor, arena, workspace) the run may allocate");
  cmd->add_flag("--no-nchwc", opts->noNchwc,
                "keep every tensor NCHW (no blocked-layout convolutions), to compare");
  addPluginOption(*cmd, opts->plugins);
  return [opts] { return runModel(*opts); };
}

}  // namespace kiln::cli
