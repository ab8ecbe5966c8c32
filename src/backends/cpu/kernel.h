// CPU kernel interface: a kernel is a closure made once per node at build time (where it may
// pre-pack constant weights) and called on every run with the node's tensors. The registry that
// chooses among a family's candidate kernels is in kernel_registry.h.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/internal_api.h"
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

class KILN_INTERNAL_API KernelContext {
 public:
  /// `planned`, when given, has one entry per output: output() and allocateOutput() return a
  /// view of it when the tensor fits, else allocate on the heap.
  KernelContext(const ir::Node& node, std::vector<const Tensor*> inputs,
                std::vector<Tensor>& outputs, const std::vector<ir::TypeInfo>& outputTypes,
                const std::vector<OutputStorage>* planned = nullptr);
  /// A context for a stage of the same node run on other tensors (a kernel made of another op's
  /// kernel, kernels/onnx_stage.h): its failures name the outer node, and nothing is planned.
  KernelContext(const KernelContext& outer, std::vector<const Tensor*> inputs,
                std::vector<Tensor>& outputs, const std::vector<ir::TypeInfo>& outputTypes);

  // The node is kept only to name it in fail() and to tell which outputs the graph uses: a kernel
  // reads its attributes when it is made (kernels/node_label.h), never through its context.
  size_t numInputs() const { return inputs_.size(); }
  bool hasInput(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  const Tensor& input(size_t i) const;

  size_t numOutputs() const { return outputs_.size(); }
  /// Whether the graph uses output i (optional outputs may be omitted).
  bool wantsOutput(size_t i) const {
    return i < node_.outputs.size() && node_.outputs[i] != ir::kNoValue;
  }
  /// Output i, allocated on first use with the type inferred for it; fails if its shape is
  /// data-dependent (use allocateOutput then). Unlike Tensor(dtype, shape), planned storage is
  /// not zeroed: kernels write every element.
  Tensor& output(size_t i);
  Tensor& allocateOutput(size_t i, DataType dtype, Shape shape);
  /// Makes output i share an existing tensor's storage (Reshape, Identity, ...).
  void setOutput(size_t i, Tensor tensor);

  [[noreturn]] void fail(const std::string& message,
                         ErrorCode code = ErrorCode::kRuntimeError) const;

  /// `bytes` of scratch memory for this call, 64-byte aligned and uninitialized: the workspace the
  /// memory plan reserved for the node (the kernel declared its size, kernel_registry.h) when it is
  /// large enough, else a heap buffer this context keeps for its next calls (unplanned runs).
  void* workspace(uint64_t bytes);
  /// The graph's names of the node's outputs (one per output, "" for an omitted one), so that a
  /// refused output names its tensor as well as its index; null: index only.
  void setOutputNames(const std::vector<std::string>* names) { outputNames_ = names; }
  /// The planned workspace (an arena slice) handed to the kernel on each call; null: none.
  void setWorkspace(void* data, uint64_t bytes) {
    workspace_ = data;
    workspaceBytes_ = bytes;
  }

 private:
  Tensor makeOutput(size_t i, DataType dtype, Shape shape) const;

  const ir::Node& node_;
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor>& outputs_;
  const std::vector<ir::TypeInfo>& outputTypes_;
  const std::vector<OutputStorage>* planned_;
  const std::vector<std::string>* outputNames_ = nullptr;
  void* workspace_ = nullptr;
  uint64_t workspaceBytes_ = 0;
  std::shared_ptr<void> heapWorkspace_;  // for calls with no (or too small a) planned workspace
  uint64_t heapWorkspaceBytes_ = 0;
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

/// How a kernel's output 0 may share memory with its inputs; the memory planner reads it
/// (engine/memory_plan.h) instead of knowing ops by name.
struct KernelMemoryRules {
  /// Inputs whose storage output 0 may take over when such an input dies at the node (same size
  /// and type), tried in this order: the kernel reads each element of that input only to compute
  /// the output element at the same place, before writing it.
  std::vector<size_t> inPlaceInputs;
  /// Output 0 is a view of input 0: the kernel hands the input's storage on with setOutput.
  bool outputViewsInput0 = false;
};

/// Registers a factory as the only candidate of its (domain, op type) family, named
/// any_<op>_generic (KernelRegistry::addGeneric in kernel_registry.h).
struct KILN_INTERNAL_API KernelRegistrar {
  KernelRegistrar(const char* domain, const char* opType, KernelFactory factory,
                  KernelMemoryRules rules = {});
  KernelRegistrar(const char* domain, const char* opType, KernelFn fn,
                  KernelMemoryRules rules = {});
};

/// Registers a CPU kernel for an ai.onnx op: KILN_REGISTER_CPU_KERNEL("Relu", reluKernel);
/// The second argument is either a KernelFn or a KernelFactory.
#define KILN_REGISTER_CPU_KERNEL(opType, fnOrFactory)                                      \
  static ::kiln::cpu::KernelRegistrar KILN_CONCAT(kilnCpuKernel_, __COUNTER__)("", opType, \
                                                                               fnOrFactory)
#define KILN_REGISTER_CPU_KERNEL_DOMAIN(domain, opType, fnOrFactory)                           \
  static ::kiln::cpu::KernelRegistrar KILN_CONCAT(kilnCpuKernel_, __COUNTER__)(domain, opType, \
                                                                               fnOrFactory)
/// The same with the kernel's memory rules: KILN_REGISTER_CPU_KERNEL_WITH_RULES("Relu", fn, {{0}});
#define KILN_REGISTER_CPU_KERNEL_WITH_RULES(opType, fnOrFactory, ...)           \
  static ::kiln::cpu::KernelRegistrar KILN_CONCAT(kilnCpuKernel_, __COUNTER__)( \
      "", opType, fnOrFactory, ::kiln::cpu::KernelMemoryRules __VA_ARGS__)

}  // namespace kiln::cpu
