// Running built engines, as with TensorRT's IRuntime / ICudaEngine / IExecutionContext.
//
//   Runtime runtime(logger);
//   Result<std::shared_ptr<const Engine>> engine = runtime.deserializeEngine(plan.data(),
//   plan.size()); auto context = (*engine)->createExecutionContext(); context->setInputShape("x",
//   {2, 3, 224, 224}); context->setTensorAddress("x", inputData); context->setTensorAddress("y",
//   outputData, outputBytes); Status s = context->execute();               // or: CompletionEvent e
//   = context->enqueue(); e.wait();
//
// An Engine is immutable: many contexts, on different threads, may share one. A context is
// used by one thread at a time.
#pragma once
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/logger.h"
#include "kiln/optimization_profile.h"
#include "kiln/profiler.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln {

enum class TensorIOMode { kNONE, kINPUT, kOUTPUT };

/// One layer of a built engine and the kernel chosen for it (an engine inspector).
/// One candidate kernel of a layer as the builder's tactic selection saw it.
struct TacticTiming {
  std::string kernel;        // candidate id
  double milliseconds = -1;  // its median time at the opt shapes; < 0: not timed
  std::string note;          // why it was not timed (declined the layer, failed), "" when timed
};

struct LayerInfo {
  std::string name;
  std::string type;       // ONNX operator
  std::string kernel;     // the chosen kernel's id: "f32_nchwc_conv_winograd_f4x4_avx512"
  std::string kernelIsa;  // the CPU feature that kernel needs: "avx2" or "avx512f"
  /// "id: reason" for each candidate tried before the chosen one, which declined the layer.
  std::vector<std::string> declinedKernels;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<std::string> fusedFrom;  // network layers merged into this one (empty: none)
  /// What it computes in: "fp32", "bf16" (BuilderFlag::kBF16), "fp16", "int8", or its output's
  /// type ("int64", ...) for a layer that does no arithmetic in floats.
  std::string precision;
  /// How the kernel was chosen: "heuristics" (the first candidate that supports the layer and
  /// that the heuristics prefer), "timed" (the fastest of the timed candidates) or "timing cache"
  /// (the fastest by a timing cache's times).
  std::string kernelChoice = "heuristics";
  /// With "timed" or "timing cache": every candidate, timed ones first, with its time or why not.
  std::vector<TacticTiming> tactics;
};

/// How and where a plan was built.
struct PlanInfo {
  uint32_t formatVersion = 0;
  std::string kilnVersion;
  std::string cpuFeatures;  // "avx2 fma f16c"
  int threads = 0;
  uint64_t workspaceBytes = 0;
  uint32_t builderFlags = 0;
  int layersBefore = 0;
  int layersAfter = 0;
  uint64_t arenaBytes = 0;
  std::string source;  // the model or network it was built from
  int builderOptimizationLevel =
      0;  // BuilderConfig::setBuilderOptimizationLevel (0: heuristics only)
};

class ExecutionContext;

class KILN_API Engine {
 public:
  int getNbIOTensors() const;
  /// Inputs first, then outputs; "" past the end.
  std::string getIOTensorName(int index) const;
  TensorIOMode getTensorIOMode(const std::string& name) const;  // kNONE for an unknown name
  DataType getTensorDataType(const std::string& name) const;
  /// -1 where a dim is dynamic; empty for an unknown name.
  Shape getTensorShape(const std::string& name) const;
  /// True for an input that has a default value (an ONNX initializer listed as an input).
  bool hasDefaultValue(const std::string& name) const;

  int getNbOptimizationProfiles() const;
  /// Empty when the name is not an input or the profile does not exist.
  Shape getProfileShape(const std::string& inputName, int profileIndex,
                        OptProfileSelector which) const;
  std::vector<int64_t> getProfileShapeValues(const std::string& inputName, int profileIndex,
                                             OptProfileSelector which) const;

  int getNbLayers() const;
  const LayerInfo& getLayerInfo(int index) const;
  const PlanInfo& getPlanInfo() const;

  Result<std::unique_ptr<ExecutionContext>> createExecutionContext() const;

  struct Impl;
  explicit Engine(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<const Impl> impl_;
};

/// Completion of an enqueue()d inference.
class KILN_API CompletionEvent {
 public:
  CompletionEvent() = default;
  explicit CompletionEvent(std::shared_future<Status> done) : done_(std::move(done)) {}
  /// Blocks until the inference has finished; returns its status.
  Status wait() const;
  bool ready() const;

 private:
  std::shared_future<Status> done_;
};

class KILN_API ExecutionContext {
 public:
  ~ExecutionContext();  // waits for an enqueued inference

  /// Selects the optimization profile whose ranges input shapes must be in (default 0).
  Status setOptimizationProfile(int index);
  int getOptimizationProfile() const;
  /// Sets a dynamic input's shape; rejected (naming the input, index, value and range) when it
  /// is outside the profile or disagrees with a fixed dim.
  Status setInputShape(const std::string& name, const Shape& dims);
  /// An input's shape, or an output's shape resolved from the input shapes (-1 where it depends
  /// on data not yet computed; the exact shape after execute()).
  Result<Shape> getTensorShape(const std::string& name) const;
  /// Binds user memory (bytes, if not 0, is the buffer's size and is checked). Inputs are read in
  /// place (zero copy). An output whose size the input shapes determine is computed in the buffer
  /// itself; one whose size depends on the data (NonZero, ...), or whose buffer overlaps a bound
  /// input, is computed elsewhere and copied there after the run.
  Status setTensorAddress(const std::string& name, void* address, uint64_t bytes = 0);
  /// Binds a tensor as an input (shares its storage) and sets the input's shape from it.
  Status setInputTensor(const std::string& name, const Tensor& tensor);
  /// An output of the last run (shares the context's storage until the next run).
  Result<Tensor> getOutputTensor(const std::string& name) const;

  /// Intra-op threads of this context's runs, including the caller's (0: one per hardware thread);
  /// by default the engine's (BuilderConfig::setThreads). Contexts of one engine may differ.
  Status setThreads(int threads);
  int getThreads() const;

  /// The largest single buffer this context's runs may allocate (a tensor, the activation arena,
  /// a kernel workspace); a run whose shapes need more fails at once naming the node, output and
  /// shape. 0 = the default, 90 % of this machine's physical memory; any other value replaces it.
  void setAllocationLimit(uint64_t bytes);
  uint64_t getAllocationLimit() const;

  /// Reports each layer's time of every later run to `profiler` (nullptr: stop); the profiler
  /// must outlive those runs.
  void setProfiler(IProfiler* profiler);
  IProfiler* getProfiler() const;

  /// Runs the engine once, blocking.
  Status execute();
  /// Starts a run and returns at once; don't touch the context's bindings until it completes.
  CompletionEvent enqueue();

  struct Impl;
  explicit ExecutionContext(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

class KILN_API Runtime {
 public:
  explicit Runtime(ILogger& logger) : logger_(logger) {}
  /// Validates the plan (checksums, version, CPU features, every size and offset) and loads it;
  /// the packed weights are copied out of `data`.
  Result<std::shared_ptr<const Engine>> deserializeEngine(const void* data, size_t size) const;
  /// Memory-maps the plan file and loads it; the kernels' packed weights are used where they lie
  /// in the mapping. Their checksum (docs/plan-format.md) is checked only after
  /// setVerifyPackedWeights(true), which reads the whole file at load instead of when the
  /// layers first run; every other byte is always checked.
  Result<std::shared_ptr<const Engine>> deserializeEngineFromFile(const std::string& path) const;
  void setVerifyPackedWeights(bool verify) { verifyPackedWeights_ = verify; }
  bool getVerifyPackedWeights() const { return verifyPackedWeights_; }

 private:
  ILogger& logger_;
  bool verifyPackedWeights_ = false;
};

inline std::unique_ptr<Runtime> createRuntime(ILogger& logger) {
  return std::make_unique<Runtime>(logger);
}

}  // namespace kiln
