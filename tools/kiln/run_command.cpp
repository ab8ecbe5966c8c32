// kiln run MODEL|PLAN [--input NAME=FILE.npy]... [--shapes NAME:1x3x224x224]... [--seed N]
//                    [--output-dir DIR] [--threads N]
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

// What `kiln run` needs of a model: an ONNX Session or a built engine.
class Runner {
 public:
  virtual ~Runner() = default;
  virtual const std::vector<TensorInfo>& inputs() const = 0;
  virtual const std::vector<TensorInfo>& outputs() const = 0;
  /// Shape for a random input with dynamic dims, if the model suggests one.
  virtual std::optional<Shape> preferredShape(const TensorInfo&) const { return std::nullopt; }
  virtual NamedTensors run(const NamedTensors& inputs) = 0;
};

class SessionRunner : public Runner {
 public:
  SessionRunner(const std::string& path, const SessionOptions& options) : session_(path, options) {}
  const std::vector<TensorInfo>& inputs() const override { return session_.inputs(); }
  const std::vector<TensorInfo>& outputs() const override { return session_.outputs(); }
  NamedTensors run(const NamedTensors& inputs) override { return session_.run(inputs); }

 private:
  Session session_;
};

class PlanRunner : public Runner {
 public:
  explicit PlanRunner(const std::string& path) : logger_(Severity::kWARNING), engine_(loadPlanFile(path, logger_)) {
    for (int i = 0; i < engine_->getNbIOTensors(); ++i) {
      std::string name = engine_->getIOTensorName(i);
      TensorInfo info;
      info.name = name;
      info.dtype = engine_->getTensorDataType(name);
      info.shape = engine_->getTensorShape(name);
      info.dimNames.assign(info.shape.size(), "");
      info.hasShape = true;
      info.optional = engine_->hasDefaultValue(name);
      (engine_->getTensorIOMode(name) == TensorIOMode::kINPUT ? inputs_ : outputs_).push_back(std::move(info));
    }
    auto context = engine_->createExecutionContext();
    if (!context.ok()) throw errorFromStatus(context.status());
    context_ = std::move(*context);
  }
  const std::vector<TensorInfo>& inputs() const override { return inputs_; }
  const std::vector<TensorInfo>& outputs() const override { return outputs_; }
  std::optional<Shape> preferredShape(const TensorInfo& info) const override {
    Dims opt = engine_->getProfileShape(info.name, 0, OptProfileSelector::kOPT);
    if (opt.empty() && !info.shape.empty()) return std::nullopt;
    return opt;
  }
  NamedTensors run(const NamedTensors& inputs) override {
    for (const auto& [name, tensor] : inputs) check(context_->setInputTensor(name, tensor));
    check(context_->execute());
    NamedTensors outputs;
    for (const TensorInfo& info : outputs_) {
      auto t = context_->getOutputTensor(info.name);
      if (!t.ok()) throw errorFromStatus(t.status());
      outputs.emplace_back(info.name, *t);
    }
    return outputs;
  }

 private:
  static void check(const Status& s) {
    if (!s.ok()) throw errorFromStatus(s);
  }
  StderrLogger logger_;
  std::shared_ptr<const Engine> engine_;
  std::unique_ptr<ExecutionContext> context_;
  std::vector<TensorInfo> inputs_, outputs_;
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

void checkNamesAreInputs(const Runner& session, const std::set<std::string>& names, const char* option) {
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

// The shape to use for a random input: --shapes if given, else the declared shape with free dims
// from the plan's profile (opt shapes) or 1.
Shape randomInputShape(const Runner& runner, const TensorInfo& info, const std::map<std::string, Shape>& shapes) {
  auto it = shapes.find(info.name);
  if (it != shapes.end()) return it->second;
  if (!info.hasShape) {
    throw Error(ErrorCode::kInvalidArgument,
                "input '" + info.name + "' has no declared shape; give one with --shapes " + info.name + ":DIMS");
  }
  Shape shape;
  bool free = false;
  std::optional<Shape> preferred = runner.preferredShape(info);
  for (size_t i = 0; i < info.shape.size(); ++i) {
    free = free || info.shape[i] < 0;
    shape.push_back(info.shape[i] >= 0 ? info.shape[i] : preferred && preferred->size() > i ? (*preferred)[i] : 1);
  }
  if (free) {
    std::cout << "note: input '" << info.name << "' has dynamic dims (" << describeInfoShape(info)
              << "); using " << shapeToString(shape) << " (set it with --shapes)\n";
  }
  return shape;
}

NamedTensors makeInputs(const Runner& session, const RunOptions& opts) {
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
      inputs.emplace_back(info.name, randomTensor(dtype, randomInputShape(session, info, shapes), opts.seed * 7919 + index));
    }
  }
  return inputs;
}

void printModelSummary(const Runner& session, const std::string& path, bool plan) {
  std::cout << (plan ? "plan " : "model ") << path << "\n";
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
  const bool plan = isPlanFile(opts.model);
  std::unique_ptr<Runner> runner;
  if (plan) runner = std::make_unique<PlanRunner>(opts.model);
  else runner = std::make_unique<SessionRunner>(opts.model, sessionOptions);
  printModelSummary(*runner, opts.model, plan);
  NamedTensors inputs = makeInputs(*runner, opts);
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
  cmd->add_option("--input", opts->inputs, "NAME=FILE.npy: an input's value (repeatable)");
  cmd->add_option("--shapes", opts->shapes, "NAME:1x3x224x224: shape of a random input (repeatable)");
  cmd->add_option("--seed", opts->seed, "seed for random inputs");
  cmd->add_option("--output-dir", opts->outputDir, "write each output as DIR/<name>.npy and DIR/outputs.json");
  cmd->add_option("--threads", opts->threads, "intra-op threads (0 = physical cores)");
  return [opts] { return runModel(*opts); };
}

}  // namespace kiln::cli
