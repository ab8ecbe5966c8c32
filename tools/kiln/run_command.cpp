// kiln run MODEL [--input NAME=FILE.npy]... [--shapes NAME:1x3x224x224]... [--seed N]
//               [--output-dir DIR] [--threads N]
#include <chrono>
#include <iomanip>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "commands.h"
#include "kiln/npy.h"
#include "kiln/session.h"
#include "tensor_summary.h"

namespace kiln::cli {

namespace {

struct RunOptions {
  std::string model;
  std::vector<std::string> inputs;
  std::vector<std::string> shapes;
  uint64_t seed = 0;
  std::string outputDir;
  int threads = 0;
};

std::map<std::string, std::string> parseInputFiles(const std::vector<std::string>& options) {
  std::map<std::string, std::string> files;
  for (const std::string& opt : options) {
    auto eq = opt.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error(ErrorCode::kInvalidArgument, "bad --input value '" + opt + "': expected NAME=FILE.npy");
    }
    files[opt.substr(0, eq)] = opt.substr(eq + 1);
  }
  return files;
}

void checkNamesAreInputs(const Session& session, const std::set<std::string>& names, const char* option) {
  for (const std::string& name : names) {
    bool found = false;
    for (const auto& info : session.inputs()) found = found || info.name == name;
    if (!found) {
      std::string all;
      for (const auto& info : session.inputs()) all += (all.empty() ? "" : ", ") + info.name;
      throw Error(ErrorCode::kInvalidArgument,
                  std::string(option) + " names '" + name + "', which is not an input of the model (inputs: " + all + ")");
    }
  }
}

// The shape to use for a random input: --shapes if given, else the declared shape with free dims = 1.
Shape randomInputShape(const TensorInfo& info, const std::map<std::string, Shape>& shapes) {
  auto it = shapes.find(info.name);
  if (it != shapes.end()) return it->second;
  if (!info.hasShape) {
    throw Error(ErrorCode::kInvalidArgument,
                "input '" + info.name + "' has no declared shape; give one with --shapes " + info.name + ":DIMS");
  }
  Shape shape;
  bool free = false;
  for (int64_t d : info.shape) {
    free = free || d < 0;
    shape.push_back(d < 0 ? 1 : d);
  }
  if (free) {
    std::cout << "note: input '" << info.name << "' has dynamic dims (" << describeInfoShape(info)
              << "); using " << shapeToString(shape) << " (set it with --shapes)\n";
  }
  return shape;
}

NamedTensors makeInputs(const Session& session, const RunOptions& opts) {
  auto files = parseInputFiles(opts.inputs);
  auto shapes = parseShapeOptions(opts.shapes);
  std::set<std::string> fileNames, shapeNames;
  for (const auto& kv : files) fileNames.insert(kv.first);
  for (const auto& kv : shapes) shapeNames.insert(kv.first);
  checkNamesAreInputs(session, fileNames, "--input");
  checkNamesAreInputs(session, shapeNames, "--shapes");
  NamedTensors inputs;
  uint64_t index = 0;
  for (const TensorInfo& info : session.inputs()) {
    ++index;
    auto file = files.find(info.name);
    if (file != files.end()) {
      inputs.emplace_back(info.name, readNpy(file->second));
    } else if (!info.optional) {
      DataType dtype = info.dtype == DataType::kUndefined ? DataType::kFloat32 : info.dtype;
      inputs.emplace_back(info.name, randomTensor(dtype, randomInputShape(info, shapes), opts.seed * 7919 + index));
    }
  }
  return inputs;
}

void printModelSummary(const Session& session, const std::string& path) {
  std::cout << "model " << path << "\n";
  for (const auto& info : session.inputs()) {
    std::cout << "  input  " << info.name << "  " << dataTypeName(info.dtype) << "[" << describeInfoShape(info) << "]"
              << (info.optional ? "  (has a default)" : "") << "\n";
  }
  for (const auto& info : session.outputs()) {
    std::cout << "  output " << info.name << "  " << dataTypeName(info.dtype) << "[" << describeInfoShape(info)
              << "]\n";
  }
}

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
  SessionOptions sessionOptions;
  sessionOptions.threads = opts.threads;
  Session session(opts.model, sessionOptions);
  printModelSummary(session, opts.model);
  NamedTensors inputs = makeInputs(session, opts);
  auto start = std::chrono::steady_clock::now();
  NamedTensors outputs = session.run(inputs);
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
  cmd->add_option("model", opts->model, "ONNX model file")->required();
  cmd->add_option("--input", opts->inputs, "NAME=FILE.npy: an input's value (repeatable)");
  cmd->add_option("--shapes", opts->shapes, "NAME:1x3x224x224: shape of a random input (repeatable)");
  cmd->add_option("--seed", opts->seed, "seed for random inputs");
  cmd->add_option("--output-dir", opts->outputDir, "write each output as DIR/<name>.npy and DIR/outputs.json");
  cmd->add_option("--threads", opts->threads, "intra-op threads (0 = physical cores)");
  return [opts] { return runModel(*opts); };
}

}  // namespace kiln::cli
