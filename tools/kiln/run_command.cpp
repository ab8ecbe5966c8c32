// kiln run MODEL|PLAN [--input NAME=FILE.npy]... [--shapes NAME:1x3x224x224]... [--seed N]
//                    [--output-dir DIR] [--threads N] [--plugins LIB.so]...
// MODEL is an ONNX file (run with Session) or a plan from `kiln build` (run with an engine).
#include <chrono>
#include <iomanip>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "commands.h"
#include "kiln/npy.h"
#include "kiln/session.h"
#include "model_runner.h"
#include "plugin_options.h"
#include "tensor_summary.h"

namespace kiln::cli {

namespace {

struct RunOptions {
  std::string model;
  InputOptions in;
  std::string outputDir;
  int threads = 0;
  std::vector<std::string> plugins;
};

// Writes DIR/<name>.npy for each output and DIR/outputs.json mapping names to files.
void writeOutputs(const NamedTensors& outputs, const std::string& dir) {
  std::filesystem::create_directories(dir);
  nlohmann::json manifest;
  manifest["outputs"] = nlohmann::json::array();
  std::set<std::string> used;
  for (const auto& [name, tensor] : outputs) {
    std::string base = sanitizeFileName(name);
    std::string file = base + ".npy";
    for (int k = 1; used.count(file); ++k) file = base + "_" + std::to_string(k) + ".npy";
    used.insert(file);
    if (file != name + ".npy") {
      std::cout << "note: output '" << name << "' is written as " << file << " (name made safe for the file system)\n";
    }
    writeNpy((std::filesystem::path(dir) / file).string(), tensor);
    manifest["outputs"].push_back({{"name", name},
                                   {"file", file},
                                   {"shape", tensor.shape()},
                                   {"dtype", dataTypeName(tensor.dtype())}});
  }
  std::ofstream(std::filesystem::path(dir) / "outputs.json") << manifest.dump(2) << "\n";
}

int runModel(const RunOptions& opts) {
  loadPlugins(opts.plugins);
  std::unique_ptr<Runner> runner = openModel(opts.model, opts.threads);
  printModelSummary(*runner, opts.model);
  NamedTensors inputs = makeInputs(*runner, opts.in);
  auto start = std::chrono::steady_clock::now();
  NamedTensors outputs = runner->run(inputs);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::cout << "inputs\n";
  for (const auto& [name, t] : inputs) std::cout << summarizeTensor(name, t) << "\n";
  std::cout << "outputs (" << std::fixed << std::setprecision(2) << ms << " ms)\n" << std::defaultfloat;
  for (const auto& [name, t] : outputs) std::cout << summarizeTensor(name, t) << "\n";
  if (!opts.outputDir.empty()) writeOutputs(outputs, opts.outputDir);
  return 0;
}

}  // namespace

Action addRunCommand(CLI::App& app) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Run a model once on given or random inputs");
  cmd->add_option("model", opts->model, "ONNX model file or kiln plan")->required();
  addInputOptions(*cmd, opts->in);
  cmd->add_option("--output-dir", opts->outputDir, "write each output as DIR/<name>.npy and DIR/outputs.json");
  cmd->add_option("--threads", opts->threads, "intra-op threads (0 = one per hardware thread)");
  addPluginOption(*cmd, opts->plugins);
  return [opts] { return runModel(*opts); };
}

}  // namespace kiln::cli
