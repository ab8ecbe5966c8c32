#include "kiln/session.h"

#include <algorithm>
#include <mutex>

#include "backends/cpu/run_control.h"
#include "build/compile.h"
#include "core/tensor_limits.h"
#include "engine/execution_context_impl.h"
#include "ir/op_schema.h"
#include "onnx/loader.h"

namespace kiln {

namespace {

TensorInfo describeValue(const ir::Graph& graph, int id) {
  const ir::Value& v = graph.value(id);
  TensorInfo info;
  info.name = v.name;
  info.dtype = v.type.dtype;
  info.optional = v.constant.has_value();
  info.isSequence = v.type.isSequence;
  info.isOptionalType = v.type.isOptional;
  info.mapKeyType = v.type.mapKeyType;
  if (v.type.shape && !v.type.isSequence) {
    info.hasShape = true;
    for (const ir::Dim& d : *v.type.shape) {
      info.shape.push_back(d.isKnown() ? d.value : -1);
      info.dimNames.push_back(d.symbol);
    }
  }
  return info;
}

std::string declaredShape(const TensorInfo& info) {
  if (!info.hasShape) return "?";
  std::string s;
  for (size_t i = 0; i < info.shape.size(); ++i) {
    if (i) s += "x";
    s += info.shape[i] >= 0 ? std::to_string(info.shape[i])
                            : (info.dimNames[i].empty() ? "?" : info.dimNames[i]);
  }
  return s.empty() ? "scalar" : s;
}

[[noreturn]] void badInput(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, message);
}

// Checks one input tensor against what the model declares, as ONNX Runtime does.
void checkInput(const TensorInfo& info, const Tensor& t) {
  if (!t.defined()) badInput("input '" + info.name + "' has no value");
  if (info.mapKeyType != DataType::kUndefined || t.isMap() ||
      t.mapKeyType() != DataType::kUndefined) {
    badInput("input '" + info.name + "' is a map or a sequence of maps; kiln does not read maps");
  }
  if (t.isNone() && !info.isOptionalType)
    badInput("input '" + info.name + "' is " + t.describe() + " but is not an optional");
  if ((t.isSequence() || t.isNoneOfSequence()) != info.isSequence) {
    badInput("input '" + info.name + "' is " + t.describe() + " but the model expects a " +
             (info.isSequence ? "sequence of " : "tensor of ") + dataTypeName(info.dtype));
  }
  if (info.dtype != DataType::kUndefined && t.dtype() != info.dtype) {
    badInput("input '" + info.name + "' has type " + dataTypeName(t.dtype()) +
             " but the model expects " + dataTypeName(info.dtype));
  }
  if (!info.hasShape || t.isSequence() || t.isNone())
    return;  // a sequence's items have no declared shape
  if (t.rank() != info.shape.size()) {
    badInput("input '" + info.name + "' has rank " + std::to_string(t.rank()) + " (shape " +
             shapeToString(t.shape()) + ") but the model expects rank " +
             std::to_string(info.shape.size()) + " (shape " + declaredShape(info) + ")");
  }
  std::string bad;
  for (size_t i = 0; i < info.shape.size(); ++i) {
    if (info.shape[i] >= 0 && t.dim(i) != info.shape[i]) {
      bad += (bad.empty() ? "" : "; ") + std::string("index ") + std::to_string(i) + ": got " +
             std::to_string(t.dim(i)) + ", expected " + std::to_string(info.shape[i]);
    }
  }
  if (!bad.empty()) {
    badInput("input '" + info.name + "' has invalid dimensions (" + bad + "): shape given " +
             shapeToString(t.shape()) + ", model expects " + declaredShape(info));
  }
}

// True when value `id` is a constant or, through view ops (Reshape, Identity, ...), shows a
// constant's storage.
bool showsConstantStorage(const ir::Graph& graph, int id) {
  for (;;) {
    if (graph.value(id).constant) return true;
    // Found by search: passes that rewrite nodes do not all keep Value::producer up to date.
    auto producer = std::find_if(graph.nodes.begin(), graph.nodes.end(), [&](const ir::Node& n) {
      return std::find(n.outputs.begin(), n.outputs.end(), id) != n.outputs.end();
    });
    if (producer == graph.nodes.end() || producer->outputs[0] != id ||
        !kernelMemoryRules(graph, *producer).outputViewsInput0 || producer->inputs.empty() ||
        producer->inputs[0] == ir::kNoValue) {
      return false;
    }
    id = producer->inputs[0];
  }
}

// True when `t`'s storage lies inside (or is) one of the inputs' storage.
bool overlapsAny(const Tensor& t, const NamedTensors& inputs) {
  if (t.isSequence() || t.isNone() || t.byteSize() == 0) return false;
  const auto* begin = static_cast<const char*>(t.raw());
  const char* end = begin + t.byteSize();
  for (const auto& [name, in] : inputs) {
    if (in.isSequence() || in.isNone()) continue;
    const auto* inBegin = static_cast<const char*>(in.raw());
    if (begin < inBegin + in.byteSize() && inBegin < end) return true;
  }
  return false;
}

// Appends the tensors `options` marks (extraOutputs, then with markAllOutputs every node output
// in topological order) to the graph's outputs, each once; an unknown name is an error naming it.
void markOutputs(ir::Graph& graph, const SessionOptions& options) {
  auto mark = [&](int id) {
    if (std::find(graph.outputs.begin(), graph.outputs.end(), id) == graph.outputs.end())
      graph.outputs.push_back(id);
  };
  for (const std::string& name : options.extraOutputs) {
    const int id = graph.findValue(name);
    if (name.empty() || id == ir::kNoValue) {
      throw Error(ErrorCode::kInvalidArgument,
                  "cannot mark '" + name + "' as an output: the graph has no tensor of that name");
    }
    mark(id);
  }
  if (!options.markAllOutputs) return;
  for (const ir::Node& node : graph.nodes)
    for (int id : node.outputs)
      if (id != ir::kNoValue) mark(id);
}

}  // namespace

struct Session::Impl {
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
  std::vector<size_t> inputIO;  // per input: its index in the engine's I/O list
  std::shared_ptr<const Engine::Impl> engine;
  std::shared_ptr<cpu::ThreadPool> pool;  // shared by the contexts
  std::mutex contextsMutex;
  /// Contexts not running now: a run takes one (or makes one when all are busy, so concurrent
  /// runs each have their own arena) and puts it back.
  std::vector<std::unique_ptr<ExecutionContext::Impl>> idleContexts;
  IProfiler* profiler = nullptr;
  int64_t maxLoopIterations = 0;
  uint64_t allocationLimit = 0;
  ModelMetadata metadata;
  std::vector<bool> constantOutputs;  // per output: a weight or a view of one (run returns a copy)

  static void checkOptions(const SessionOptions& options) {
    if (options.threads < 0)
      throw Error(ErrorCode::kInvalidArgument, "threads must be >= 0 (0 = one per core)");
    if (options.maxLoopIterations < 0) {
      throw Error(ErrorCode::kInvalidArgument, "maxLoopIterations must be >= 0 (0 = no cap)");
    }
  }
  /// Builds the engine of `model` and describes its inputs and outputs; `modelName` prefixes
  /// errors.
  void prepare(ir::Model model, const SessionOptions& options, const std::string& modelName);
  std::unique_ptr<ExecutionContext::Impl> takeContext();
  void returnContext(std::unique_ptr<ExecutionContext::Impl> context);

  // Takes an idle context for one run, and gives it back with its bindings cleared however the
  // run ends.
  class ContextLease {
   public:
    explicit ContextLease(Impl& session) : session_(session), context_(session.takeContext()) {}
    ~ContextLease() { session_.returnContext(std::move(context_)); }
    ContextLease(const ContextLease&) = delete;
    ContextLease& operator=(const ContextLease&) = delete;
    ExecutionContext::Impl* operator->() const { return context_.get(); }

   private:
    Impl& session_;
    std::unique_ptr<ExecutionContext::Impl> context_;
  };
};

Session::Session(const std::string& modelPath, SessionOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl::checkOptions(options);
  StderrLogger warnings(Severity::kWARNING);
  impl_->prepare(onnx_import::loadModel(modelPath, &impl_->metadata, &warnings), options,
                 modelPath);
}

Session::Session(const void* modelData, size_t modelSize, SessionOptions options,
                 const std::string& externalDataDir)
    : impl_(std::make_unique<Impl>()) {
  Impl::checkOptions(options);
  const std::string name = "<memory>";
  const std::string baseDir = externalDataDir.empty() ? "." : externalDataDir;
  StderrLogger warnings(Severity::kWARNING);
  impl_->prepare(onnx_import::loadModelFromBytes(modelData, modelSize, baseDir, name,
                                                 &impl_->metadata, &warnings),
                 options, name);
}

// The session's build: heuristic kernel choices (it starts fast), no optimization profile (dynamic
// dims take any size), the kernels kept in memory instead of a plan.
void Session::Impl::prepare(ir::Model model, const SessionOptions& options,
                            const std::string& modelName) {
  pool = std::make_shared<cpu::ThreadPool>(options.threads);
  profiler = options.profiler;
  maxLoopIterations = options.maxLoopIterations;
  allocationLimit = options.allocationLimitBytes;
  AllocationLimitScope limit(allocationLimit);
  BuilderConfig config;
  config.setThreads(options.threads);
  config.setBuilderOptimizationLevel(
      0);  // heuristics only: nothing timed (it has no profile either)
  if (!options.nchwcLayout) config.setFlag(BuilderFlag::kDISABLE_NCHWC_LAYOUT);
  if (options.bf16) config.setFlag(BuilderFlag::kBF16);
  if (options.fp16) config.setFlag(BuilderFlag::kFP16);
  build::CompileOptions compile;
  compile.optimize = options.optimize;
  compile.kernelPolicy = options.referenceKernels ? Executor::KernelPolicy::kMostGeneral
                                                  : Executor::KernelPolicy::kFirstSupporting;
  compile.unboundedShapes = true;
  compile.freeCopiedWeights = true;
  StderrLogger warnings(Severity::kWARNING);
  BuildReport report;
  try {
    markOutputs(model.graph, options);
    build::CompiledNetwork compiled = build::compileNetwork(std::move(model.graph), {}, modelName,
                                                            config, compile, warnings, report);
    engine = engineFromKernels(std::move(compiled.plan), std::move(compiled.kernels));
  } catch (const Error& e) {
    throw Error(e.code(), modelName + ": " + e.what());
  }
  const ir::Graph& graph = *engine->plan.graph;
  const std::vector<plan::IOTensor>& io = engine->plan.io;
  for (int id : graph.inputs) {
    inputs.push_back(describeValue(graph, id));
    const auto at = std::find_if(io.begin(), io.end(),
                                 [&](const plan::IOTensor& t) { return t.valueId == id; });
    inputIO.push_back(static_cast<size_t>(at - io.begin()));
  }
  for (int id : graph.outputs) {
    outputs.push_back(describeValue(graph, id));
    constantOutputs.push_back(showsConstantStorage(graph, id));
  }
}

std::unique_ptr<ExecutionContext::Impl> Session::Impl::takeContext() {
  {
    std::lock_guard<std::mutex> lock(contextsMutex);
    if (!idleContexts.empty()) {
      auto context = std::move(idleContexts.back());
      idleContexts.pop_back();
      return context;
    }
  }
  auto context = std::make_unique<ExecutionContext::Impl>(engine);
  context->pool = pool;
  context->profiler = profiler;
  context->allocationLimit = allocationLimit;
  return context;
}

void Session::Impl::returnContext(std::unique_ptr<ExecutionContext::Impl> context) {
  context->clearBindings();
  std::lock_guard<std::mutex> lock(contextsMutex);
  idleContexts.push_back(std::move(context));
}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

const std::vector<TensorInfo>& Session::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Session::outputs() const { return impl_->outputs; }
const ModelMetadata& Session::metadata() const { return impl_->metadata; }

NamedTensors Session::run(const NamedTensors& inputs, const RunOptions& options) const {
  std::vector<std::pair<size_t, Tensor>> feeds;  // (input index, value)
  std::vector<bool> given(impl_->inputs.size(), false);
  for (const auto& input : inputs) {
    const std::string& name = input.first;  // not a structured binding: clang 14 cannot capture one
    const Tensor& tensor = input.second;
    auto it = std::find_if(impl_->inputs.begin(), impl_->inputs.end(),
                           [&](const TensorInfo& i) { return i.name == name; });
    if (it == impl_->inputs.end()) {
      std::string names;
      for (const auto& i : impl_->inputs) names += (names.empty() ? "" : ", ") + i.name;
      badInput("'" + name + "' is not an input of the model; its inputs are: " + names);
    }
    size_t index = static_cast<size_t>(it - impl_->inputs.begin());
    if (given[index]) badInput("input '" + name + "' is given twice");
    given[index] = true;
    checkInput(*it, tensor);
    feeds.emplace_back(index, tensor);
  }
  for (size_t i = 0; i < given.size(); ++i) {
    if (!given[i] && !impl_->inputs[i].optional)
      badInput("input '" + impl_->inputs[i].name + "' is missing");
  }
  const cpu::RunControl control{options.terminate, impl_->maxLoopIterations};
  cpu::RunControlScope controlled(control);
  Impl::ContextLease context(*impl_);
  for (const auto& [index, tensor] : feeds) context->bindTensor(impl_->inputIO[index], tensor);
  context->run();
  std::vector<Tensor> results;
  const std::vector<plan::IOTensor>& io = impl_->engine->plan.io;
  for (size_t i = 0; i < io.size(); ++i)
    if (io[i].mode == TensorIOMode::kOUTPUT) results.push_back(context->outputs[i]);
  NamedTensors named;
  for (size_t i = 0; i < results.size(); ++i) {
    // An output that is a weight or (a view of) an input is copied, so that the caller may
    // write to it, as ONNX Runtime's outputs allow.
    if (impl_->constantOutputs[i] || overlapsAny(results[i], inputs))
      results[i] = results[i].clone();
    named.emplace_back(impl_->outputs[i].name, std::move(results[i]));
  }
  return named;
}

}  // namespace kiln
