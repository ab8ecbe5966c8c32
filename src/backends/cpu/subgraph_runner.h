// How control-flow kernels (If, Loop, Scan, SequenceMap) run their bodies without depending on
// the engine above them: the engine hands each kernel a SubgraphRunnerFactory through
// KernelCreateInfo::subgraphs, and the kernel makes one runner per body when it is created.
#pragma once
#include <memory>
#include <vector>

#include "backends/cpu/kernel.h"
#include "ir/graph.h"
#include "kiln/tensor.h"

namespace kiln::cpu {

/// Runs one body graph, its kernels made once; safe to call from several threads at once.
class SubgraphRunner {
 public:
  virtual ~SubgraphRunner() = default;

  virtual const ir::Graph& graph() const = 0;
  size_t numInputs() const { return graph().inputs.size(); }
  size_t numOutputs() const { return graph().outputs.size(); }

  /// Runs the body: `inputs` bind its graph inputs in order, `outer` its outerInputs (the owning
  /// node's implicit inputs, in order; nullptr where absent). Returns its outputs in order.
  virtual std::vector<Tensor> run(const std::vector<Tensor>& inputs,
                                  const std::vector<const Tensor*>& outer) const = 0;
};

/// Makes the runner of a body graph; throws listing the body's unsupported nodes.
class SubgraphRunnerFactory {
 public:
  virtual ~SubgraphRunnerFactory() = default;
  virtual std::shared_ptr<const SubgraphRunner> makeRunner(
      std::shared_ptr<const ir::Graph> body) const = 0;
};

/// The runner of the body graph in attribute `attribute` of the node being created, made by
/// info.subgraphs; fails naming the node when the kernel's creator gave no factory.
std::shared_ptr<const SubgraphRunner> makeBodyRunner(const KernelCreateInfo& info,
                                                     const char* attribute);

}  // namespace kiln::cpu
