// Opening a model for the CLI (an ONNX file through Session, or a plan through an engine) and
// making its inputs from .npy files or seeded random values; shared by `kiln run` and `kiln bench`.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/engine.h"
#include "kiln/session.h"
#include "onnx/value_proto.h"

namespace kiln::cli {

/// What the CLI needs of a model: an ONNX Session or a built engine.
class Runner {
 public:
  virtual ~Runner() = default;
  virtual const std::vector<TensorInfo>& inputs() const = 0;
  virtual const std::vector<TensorInfo>& outputs() const = 0;
  /// Shape for a random input with dynamic dims, if the model suggests one.
  virtual std::optional<Shape> preferredShape(const TensorInfo&) const { return std::nullopt; }
  virtual NamedTensors run(const NamedTensors& inputs) = 0;
  virtual bool isPlan() const = 0;
};

/// A Runner for an ONNX model (Session with `threads`) or a plan (detected by its magic); a
/// profiler, if given, is told each layer's time of every run. nchwcLayout = false keeps an ONNX
/// model's tensors NCHW (a plan was laid out when it was built: it refuses false).
std::unique_ptr<Runner> openModel(const std::string& path, int threads,
                                  IProfiler* profiler = nullptr, bool nchwcLayout = true);
/// The same with every Session option (marked outputs, reference kernels). A plan keeps what its
/// build chose: it refuses marked outputs and the options a build decides (optimize = false,
/// reference kernels, no NCHWc), and runs on the thread count it was built for.
std::unique_ptr<Runner> openModel(const std::string& path, const SessionOptions& options);

/// A Runner for a built engine (kiln compare's in-memory builds).
std::unique_ptr<Runner> engineRunner(std::shared_ptr<const Engine> engine,
                                     IProfiler* profiler = nullptr);

/// Adds --outputs NAME,... and --mark-all (intermediate tensors returned as outputs) to a
/// subcommand.
struct MarkOptions {
  std::vector<std::string> names;
  bool all = false;
};
void addMarkOptions(CLI::App& cmd, MarkOptions& opts);

struct InputOptions {
  std::vector<std::string> inputs;  // NAME=FILE.npy or NAME=FILE.pb
  std::vector<std::string> shapes;  // NAME:1x3x224x224 for random inputs
  uint64_t seed = 0;
};

/// Adds --input, --shapes and --seed to a subcommand.
void addInputOptions(CLI::App& cmd, InputOptions& opts);
/// Inputs from files, else seeded random values; free dims from --shapes, a plan's opt shapes,
/// or 1.
NamedTensors makeInputs(const Runner& runner, const InputOptions& opts);
void printModelSummary(const Runner& runner, const std::string& path);
/// An input's or output's ONNX value type (tensor, sequence, optional), as .pb files need it.
onnx_import::ValueType valueTypeOf(const TensorInfo& info);
/// "a tensor of float32", "an optional sequence of int64".
std::string describeValueType(const TensorInfo& info);

}  // namespace kiln::cli
