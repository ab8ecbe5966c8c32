// CPU kernel interface: a kernel is a closure made once per node at build time (where it may
// pre-pack constant weights) and called on every run with the node's tensors.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/node_attrs.h"
#include "ir/op_schema.h"
#include "kiln/error.h"

namespace kiln::cpu {

class SubgraphRunnerFactory;  // backends/cpu/subgraph_runner.h

/// Memory planned for one node output (an arena slot or a caller's buffer); data == nullptr: none.
struct OutputStorage {
  void* data = nullptr;
  uint64_t bytes = 0;
  std::shared_ptr<const void> owner;  // keeps the memory alive while a tensor views it
};

class KernelContext {
 public:
  /// `planned`, when given, has one entry per output: output() and allocateOutput() return a
  /// view of it when the tensor fits, else allocate on the heap.
  KernelContext(const ir::Node& node, std::vector<const Tensor*> inputs, std::vector<Tensor>& outputs,
                const std::vector<ir::TypeInfo>& outputTypes, const std::vector<OutputStorage>* planned = nullptr);

  const ir::Node& node() const { return node_; }
  size_t numInputs() const { return inputs_.size(); }
  bool hasInput(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  const Tensor& input(size_t i) const;

  size_t numOutputs() const { return outputs_.size(); }
  /// Whether the graph uses output i (optional outputs may be omitted).
  bool wantsOutput(size_t i) const { return i < node_.outputs.size() && node_.outputs[i] != ir::kNoValue; }
  /// Output i, allocated on first use with the type inferred for it; fails if its shape is
  /// data-dependent (use allocateOutput then). Unlike Tensor(dtype, shape), planned storage is
  /// not zeroed: kernels write every element.
  Tensor& output(size_t i);
  Tensor& allocateOutput(size_t i, DataType dtype, Shape shape);
  /// Makes output i share an existing tensor's storage (Reshape, Identity, ...).
  void setOutput(size_t i, Tensor tensor);

  [[noreturn]] void fail(const std::string& message, ErrorCode code = ErrorCode::kRuntimeError) const;

 private:
  Tensor makeOutput(size_t i, DataType dtype, Shape shape) const;

  const ir::Node& node_;
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor>& outputs_;
  const std::vector<ir::TypeInfo>& outputTypes_;
  const std::vector<OutputStorage>* planned_;
};

using KernelFn = std::function<void(KernelContext&)>;

/// What a kernel factory may look at when the engine is built.
struct KernelCreateInfo {
  const ir::Node& node;
  std::vector<const ir::TypeInfo*> inputTypes;  // nullptr for omitted inputs
  std::vector<const Tensor*> constants;         // value of constant inputs, else nullptr

  /// Said by a factory that keeps its own transformed copy of constant input i (packed weights)
  /// and reads only that input's dtype and shape at run time: the engine may then free the
  /// original values (when no other node reads them), so weights are not held twice.
  void keepsOwnCopyOf(size_t i) const {
    if (ownCopies.size() <= i) ownCopies.resize(i + 1, false);
    ownCopies[i] = true;
  }
  mutable std::vector<bool> ownCopies;  // per input, filled by keepsOwnCopyOf
  /// Makes the runners of control-flow bodies (If, Loop, Scan, SequenceMap); set by whoever
  /// creates kernels (the engine's executor, constant folding).
  const SubgraphRunnerFactory* subgraphs = nullptr;
};

using KernelFactory = std::function<KernelFn(const KernelCreateInfo&)>;

class KernelRegistry {
 public:
  static KernelRegistry& global();
  void add(const std::string& domain, const std::string& opType, KernelFactory factory);
  /// The factory registered for (domain, opType), or else the fallback's answer (plugins).
  const KernelFactory* find(const std::string& domain, const std::string& opType) const;
  /// Asked by find for an op with no registered kernel (kernels/plugin_kernel.cpp sets it at load time).
  using Fallback = std::function<const KernelFactory*(const std::string& domain, const std::string& opType)>;
  void setFallback(Fallback fallback) { fallback_ = std::move(fallback); }

 private:
  std::vector<std::tuple<std::string, std::string, KernelFactory>> entries_;
  Fallback fallback_;
};

struct KernelRegistrar {
  KernelRegistrar(const char* domain, const char* opType, KernelFactory factory) {
    KernelRegistry::global().add(domain, opType, std::move(factory));
  }
  KernelRegistrar(const char* domain, const char* opType, KernelFn fn) {
    KernelRegistry::global().add(domain, opType, [fn](const KernelCreateInfo&) { return fn; });
  }
};

/// Registers a CPU kernel for an ai.onnx op: KILN_REGISTER_CPU_KERNEL("Relu", reluKernel);
/// The second argument is either a KernelFn or a KernelFactory.
#define KILN_REGISTER_CPU_KERNEL(opType, fnOrFactory) \
  static ::kiln::cpu::KernelRegistrar KILN_CONCAT(kilnCpuKernel_, __COUNTER__)("", opType, fnOrFactory)
#define KILN_REGISTER_CPU_KERNEL_DOMAIN(domain, opType, fnOrFactory) \
  static ::kiln::cpu::KernelRegistrar KILN_CONCAT(kilnCpuKernel_, __COUNTER__)(domain, opType, fnOrFactory)

}  // namespace kiln::cpu
