// The one-line way to run an ONNX model, as in ONNX Runtime:
//   kiln::Session session("model.onnx");
//   auto outputs = session.run({{"input", tensor}});
// Errors are thrown as kiln::Error (see error.h), whose message names the file, node or tensor.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/error.h"
#include "kiln/export.h"
#include "kiln/model_metadata.h"
#include "kiln/profiler.h"
#include "kiln/tensor.h"

namespace kiln {

struct SessionOptions {
  int threads = 0;       // intra-op threads; 0 = one per hardware thread
  bool optimize = true;  // run graph optimizations (constant folding, dead-node removal)
  /// With optimize: run convolutions in the blocked NCHWc layout (docs/performance.md); false
  /// keeps every tensor NCHW, to compare.
  bool nchwcLayout = true;
  IProfiler* profiler = nullptr;  // told each layer's time of every run; must outlive the session
  /// Iterations one Loop node may run per run before the run fails naming it (a model whose loop
  /// condition never turns false); 0 = no cap.
  int64_t maxLoopIterations = 0;
  /// Intermediate tensors (ONNX tensor names of the top-level graph) that run() returns after the
  /// model's outputs, in this order, as ONNX Runtime does for a tensor added as a graph output.
  /// A marked tensor is a graph output to the optimizer: fusions that would remove it leave it
  /// alone, so its value is the one the unfused graph computes (docs/debugging.md). An unknown
  /// name is an error naming it.
  std::vector<std::string> extraOutputs;
  /// Marks every tensor a node of the top-level graph computes (after extraOutputs, in
  /// topological order), like Polygraphy's `--onnx-outputs mark all`.
  bool markAllOutputs = false;
  /// Reference mode for comparisons: each node gets the most general kernel of its family (the
  /// last candidate that supports it: im2col + GEMM rather than Winograd, plain sgemm rather than
  /// packed weights) instead of the first. Combine with optimize = false for no fusion and no
  /// layout change.
  bool referenceKernels = false;
  /// BuilderFlag::kBF16 for the session's build: Conv, MatMul, Gemm and their fused forms compute
  /// in BF16 with FP32 sums where the CPU has AVX512_BF16 (else a warning, and FP32); see
  /// docs/precision.md. Without an optimization profile the layers are not timed: every eligible
  /// layer runs BF16.
  bool bf16 = false;
  /// BuilderFlag::kFP16 for the session's build: MatMul, Gemm and fused Linear layers keep their
  /// weights in FP16 (half the bytes), computed in FP32; see docs/precision.md. With bf16 too, a
  /// layer BF16 takes stays BF16.
  bool fp16 = false;
  /// The largest single buffer the session may allocate (a tensor, the activation arena, a kernel
  /// workspace): a run whose shapes need more fails at once naming the node, output and shape
  /// instead of exhausting memory. 0 = the default, 90 % of this machine's physical memory
  /// (core/tensor_limits.h); any other value replaces it, above the default too.
  uint64_t allocationLimitBytes = 0;
};

/// Options of one run, as ONNX Runtime's RunOptions.
struct RunOptions {
  /// Set to true (from any thread) to stop the run: it fails with "run terminated" before the
  /// next node or loop iteration. Must outlive the run; nullptr = not stoppable.
  const std::atomic<bool>* terminate = nullptr;
};

/// An input or output of a model. shape holds -1 where a dim is not fixed; dimNames holds the
/// symbolic name of such a dim ("batch") or "" when it has none.
struct TensorInfo {
  std::string name;
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> shape;
  std::vector<std::string> dimNames;
  bool hasShape = false;  // false when the model does not say the rank
  bool optional = false;  // an input with a default value (an initializer that is also an input)
  /// An ONNX sequence of `dtype` tensors (Tensor::sequence; no shape) rather than a tensor.
  bool isSequence = false;
  /// An ONNX optional of that tensor or sequence: its value is the tensor or sequence itself,
  /// or Tensor::none when empty.
  bool isOptionalType = false;
  /// A sequence of maps (ai.onnx.ml ZipMap's output: Tensor::sequenceOfMaps) when not
  /// kUndefined: the maps' key type (int64 or string); dtype is then their value type.
  DataType mapKeyType = DataType::kUndefined;
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class KILN_API Session {
 public:
  explicit Session(const std::string& modelPath, SessionOptions options = {});
  /// From a serialized ModelProto in memory (the caller may free it once this returns). External
  /// data files are looked up in externalDataDir ("" = the current folder); errors call the
  /// model "<memory>".
  Session(const void* modelData, size_t modelSize, SessionOptions options = {},
          const std::string& externalDataDir = "");
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  /// The model's producer, graph name, doc strings, version and metadata_props.
  const ModelMetadata& metadata() const;

  /// Runs the model. Every required input must be given, with the model's dtype and a shape that
  /// agrees with its fixed dims. Returns the outputs in the model's order.
  NamedTensors run(const NamedTensors& inputs, const RunOptions& options = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
