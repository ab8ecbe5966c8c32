#include "model_runner.h"

#include <iostream>
#include <map>
#include <set>

#include "cli_logger.h"
#include "commands.h"
#include "kiln/npy.h"
#include "onnx/value_proto.h"
#include "tensor_summary.h"

namespace kiln::cli {

namespace {

class SessionRunner : public Runner {
 public:
  SessionRunner(const std::string& path, const SessionOptions& options) : session_(path, options) {}
  const std::vector<TensorInfo>& inputs() const override { return session_.inputs(); }
  const std::vector<TensorInfo>& outputs() const override { return session_.outputs(); }
  NamedTensors run(const NamedTensors& inputs) override { return session_.run(inputs); }
  bool isPlan() const override { return false; }

 private:
  Session session_;
};

class PlanRunner : public Runner {
 public:
  /// threads > 0 overrides the thread count the plan was built with.
  PlanRunner(std::shared_ptr<const Engine> engine, IProfiler* profiler, int threads,
             uint64_t allocationLimit = 0)
      : engine_(std::move(engine)) {
    for (int i = 0; i < engine_->getNbIOTensors(); ++i) {
      std::string name = engine_->getIOTensorName(i);
      TensorInfo info;
      info.name = name;
      info.dtype = engine_->getTensorDataType(name);
      info.shape = engine_->getTensorShape(name);
      info.dimNames.assign(info.shape.size(), "");
      info.hasShape = true;
      info.optional = engine_->hasDefaultValue(name);
      (engine_->getTensorIOMode(name) == TensorIOMode::kINPUT ? inputs_ : outputs_)
          .push_back(std::move(info));
    }
    auto context = engine_->createExecutionContext();
    if (!context.ok()) throw errorFromStatus(context.status());
    context_ = std::move(*context);
    context_->setProfiler(profiler);
    if (threads > 0) checkStatus(context_->setThreads(threads));
    context_->setAllocationLimit(allocationLimit);
  }
  const std::vector<TensorInfo>& inputs() const override { return inputs_; }
  const std::vector<TensorInfo>& outputs() const override { return outputs_; }
  std::optional<Shape> preferredShape(const TensorInfo& info) const override {
    Shape opt = engine_->getProfileShape(info.name, 0, OptProfileSelector::kOPT);
    if (opt.empty() && !info.shape.empty()) return std::nullopt;
    return opt;
  }
  bool isPlan() const override { return true; }
  NamedTensors run(const NamedTensors& inputs) override {
    for (const auto& [name, tensor] : inputs) checkStatus(context_->setInputTensor(name, tensor));
    checkStatus(context_->execute());
    NamedTensors outputs;
    for (const TensorInfo& info : outputs_) {
      auto t = context_->getOutputTensor(info.name);
      if (!t.ok()) throw errorFromStatus(t.status());
      outputs.emplace_back(info.name, *t);
    }
    return outputs;
  }

 private:
  std::shared_ptr<const Engine> engine_;
  std::unique_ptr<ExecutionContext> context_;
  std::vector<TensorInfo> inputs_, outputs_;
};

std::map<std::string, std::string> parseInputFiles(const std::vector<std::string>& options) {
  std::map<std::string, std::string> files;
  for (const std::string& opt : options) {
    auto eq = opt.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  "bad --input value '" + opt + "': expected NAME=FILE.npy or NAME=FILE.pb");
    }
    files[opt.substr(0, eq)] = opt.substr(eq + 1);
  }
  return files;
}

void checkNamesAreInputs(const Runner& session, const std::set<std::string>& names,
                         const char* option) {
  for (const std::string& name : names) {
    bool found = false;
    for (const auto& info : session.inputs()) found = found || info.name == name;
    if (!found) {
      std::string all;
      for (const auto& info : session.inputs()) all += (all.empty() ? "" : ", ") + info.name;
      throw Error(ErrorCode::kInvalidArgument,
                  std::string(option) + " names '" + name +
                      "', which is not an input of the model (inputs: " + all + ")");
    }
  }
}

// The shape to use for a random input: --shapes if given, else the declared shape with free dims
// from the plan's profile (opt shapes) or 1.
Shape randomInputShape(const Runner& runner, const TensorInfo& info,
                       const std::map<std::string, Shape>& shapes) {
  auto it = shapes.find(info.name);
  if (it != shapes.end()) return it->second;
  if (!info.hasShape) {
    throw Error(ErrorCode::kInvalidArgument,
                "input '" + info.name + "' has no declared shape; give one with --shapes " +
                    info.name + ":DIMS");
  }
  Shape shape;
  bool free = false;
  std::optional<Shape> preferred = runner.preferredShape(info);
  for (size_t i = 0; i < info.shape.size(); ++i) {
    free = free || info.shape[i] < 0;
    shape.push_back(info.shape[i] >= 0                   ? info.shape[i]
                    : preferred && preferred->size() > i ? (*preferred)[i]
                                                         : 1);
  }
  if (free) {
    std::cerr << "note: input '" << info.name << "' has dynamic dims (" << describeInfoShape(info)
              << "); using " << shapeToString(shape) << " (set it with --shapes)\n";
  }
  return shape;
}

// A random value for an input; a shape too large to hold is refused naming the input.
Tensor randomInput(const TensorInfo& info, DataType dtype, const Shape& shape, uint64_t seed) {
  try {
    return randomTensor(dtype, shape, seed);
  } catch (const Error& e) {
    throw Error(e.code(), "input '" + info.name + "': " + e.what());
  }
}

// An input's value from a .npy file (tensors), or a .pb file: a TensorProto, SequenceProto or
// OptionalProto, read as the input's declared type asks.
Tensor readInputFile(const TensorInfo& info, const std::string& path) {
  const std::string what = "input '" + info.name + "'";
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, ".pb") == 0) {
    return onnx_import::readValueFile(path, valueTypeOf(info), what);
  }
  if (info.isSequence || info.isOptionalType) {
    throw Error(ErrorCode::kInvalidArgument,
                what + " is " + describeValueType(info) + ", which a .npy file cannot hold; " +
                    "give a .pb file (" +
                    (info.isOptionalType ? "OptionalProto" : "SequenceProto") + ") instead of " +
                    path);
  }
  return readNpy(path);
}

}  // namespace

onnx_import::ValueType valueTypeOf(const TensorInfo& info) {
  return {info.dtype, info.isSequence, info.isOptionalType, info.mapKeyType};
}

std::string describeValueType(const TensorInfo& info) {
  return onnx_import::describeValueType(valueTypeOf(info));
}

std::unique_ptr<Runner> openModel(const std::string& path, int threads, IProfiler* profiler,
                                  bool nchwcLayout) {
  SessionOptions options;
  options.threads = threads;
  options.profiler = profiler;
  options.nchwcLayout = nchwcLayout;
  return openModel(path, options);
}

std::unique_ptr<Runner> openModel(const std::string& path, const SessionOptions& options) {
  if (!isPlanFile(path)) return std::make_unique<SessionRunner>(path, options);
  if (!options.nchwcLayout) {
    throw Error(ErrorCode::kInvalidArgument,
                path +
                    " is a plan, laid out when it was built; build it with "
                    "`kiln build --no-nchwc` to keep its tensors NCHW");
  }
  if (!options.extraOutputs.empty() || options.markAllOutputs) {
    throw Error(
        ErrorCode::kInvalidArgument,
        path +
            " is a plan, whose outputs were chosen when it was built; build it "
            "with `kiln build --outputs NAME,...` or `--mark-all` to see intermediate tensors");
  }
  if (!options.optimize || options.referenceKernels) {
    throw Error(ErrorCode::kInvalidArgument,
                path +
                    " is a plan, optimized and given its kernels when it was built; "
                    "reference runs need the ONNX model");
  }
  CliLogger logger;  // errors come back as statuses: main() prints them once
  return std::make_unique<PlanRunner>(loadPlanFile(path, logger), options.profiler, options.threads,
                                      options.allocationLimitBytes);
}

std::unique_ptr<Runner> engineRunner(std::shared_ptr<const Engine> engine, IProfiler* profiler) {
  return std::make_unique<PlanRunner>(std::move(engine), profiler, 0);
}

void addMarkOptions(CLI::App& cmd, MarkOptions& opts) {
  cmd.add_option("--outputs", opts.names,
                 "NAME,...: intermediate tensors to return too, after the model's outputs (fusions "
                 "that would remove "
                 "them are skipped)")
      ->delimiter(',');
  cmd.add_flag("--mark-all", opts.all,
               "return every tensor the graph computes (all node outputs, topological order)");
}

void addInputOptions(CLI::App& cmd, InputOptions& opts) {
  cmd.add_option("--input", opts.inputs,
                 "NAME=FILE.npy or NAME=FILE.pb (TensorProto, SequenceProto or OptionalProto): an "
                 "input's value "
                 "(repeatable)");
  cmd.add_option("--shapes", opts.shapes, "NAME:1x3x224x224: shape of a random input (repeatable)");
  cmd.add_option("--seed", opts.seed, "seed for random inputs");
}

NamedTensors makeInputs(const Runner& session, const InputOptions& opts) {
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
      inputs.emplace_back(info.name, readInputFile(info, file->second));
    } else if (info.isSequence) {
      throw Error(ErrorCode::kInvalidArgument,
                  "input '" + info.name + "' is " + describeValueType(info) +
                      ", which has no random value; give it with --input " + info.name +
                      "=FILE.pb (a SequenceProto or OptionalProto)");
    } else if (!info.optional) {
      DataType dtype = info.dtype == DataType::kUndefined ? DataType::kFloat32 : info.dtype;
      inputs.emplace_back(info.name,
                          randomInput(info, dtype, randomInputShape(session, info, shapes),
                                      opts.seed * 7919 + index));
    }
  }
  return inputs;
}

void printModelSummary(const Runner& session, const std::string& path) {
  std::cout << (session.isPlan() ? "plan " : "model ") << path << "\n";
  for (const auto& info : session.inputs()) {
    std::cout << "  input  " << info.name << "  " << describeInfoType(info)
              << (info.optional ? "  (has a default)" : "") << "\n";
  }
  for (const auto& info : session.outputs()) {
    std::cout << "  output " << info.name << "  " << describeInfoType(info) << "\n";
  }
}

}  // namespace kiln::cli
