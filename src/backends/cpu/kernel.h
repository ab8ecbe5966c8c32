// CPU kernel interface: a kernel is a closure made once per node at build time (where it may
// pre-pack constant weights) and called on every run with the node's tensors.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/node_attrs.h"
#include "ir/op_schema.h"
#include "kiln/error.h"

namespace kiln::cpu {

class KernelContext {
 public:
  KernelContext(const ir::Node& node, std::vector<const Tensor*> inputs, std::vector<Tensor>& outputs,
                const std::vector<ir::TypeInfo>& outputTypes);

  const ir::Node& node() const { return node_; }
  size_t numInputs() const { return inputs_.size(); }
  bool hasInput(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  const Tensor& input(size_t i) const;

  size_t numOutputs() const { return outputs_.size(); }
  /// Whether the graph uses output i (optional outputs may be omitted).
  bool wantsOutput(size_t i) const { return i < node_.outputs.size() && node_.outputs[i] != ir::kNoValue; }
  /// Output i, allocated on first use with the type inferred for it; fails if its shape is
  /// data-dependent (use allocateOutput then).
  Tensor& output(size_t i);
  Tensor& allocateOutput(size_t i, DataType dtype, Shape shape);
  /// Makes output i share an existing tensor's storage (Reshape, Identity, ...).
  void setOutput(size_t i, Tensor tensor);

  [[noreturn]] void fail(const std::string& message, ErrorCode code = ErrorCode::kRuntimeError) const;

 private:
  const ir::Node& node_;
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor>& outputs_;
  const std::vector<ir::TypeInfo>& outputTypes_;
};

using KernelFn = std::function<void(KernelContext&)>;

/// What a kernel factory may look at when the engine is built.
struct KernelCreateInfo {
  const ir::Node& node;
  std::vector<const ir::TypeInfo*> inputTypes;  // nullptr for omitted inputs
  std::vector<const Tensor*> constants;         // value of constant inputs, else nullptr
};

using KernelFactory = std::function<KernelFn(const KernelCreateInfo&)>;

class KernelRegistry {
 public:
  static KernelRegistry& global();
  void add(const std::string& domain, const std::string& opType, KernelFactory factory);
  const KernelFactory* find(const std::string& domain, const std::string& opType) const;

 private:
  std::vector<std::tuple<std::string, std::string, KernelFactory>> entries_;
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
