// Runs a prepared graph on the CPU: per node, run-time shape inference, then its kernel.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernel_registry.h"
#include "core/internal_api.h"
#include "engine/memory_plan.h"
#include "engine/shape_program.h"
#include "ir/graph.h"
#include "ir/op_schema.h"
#include "kiln/profiler.h"

namespace kiln {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// Lists every node whose op kiln cannot run (no schema for its opset, or no kernel), including
/// nodes inside control-flow bodies (named by the path to them).
/// Returns one line per node, empty when everything is supported.
KILN_INTERNAL_API std::vector<std::string> findUnsupportedNodes(const ir::Graph& graph);

/// Infers a node's output shapes from its concrete inputs, then runs its kernel. `planned`, when
/// given, has one entry per output: storage the kernel's output() / allocateOutput() use;
/// `workspace`, when given, is the kernel's workspace (KernelContext::setWorkspace).
KILN_INTERNAL_API std::vector<Tensor> runNode(
    const ir::Node& node, const ir::OpSchema& schema, const cpu::KernelFn& kernel,
    const std::vector<const Tensor*>& inputs,
    const std::vector<cpu::OutputStorage>* planned = nullptr,
    const cpu::OutputStorage* workspace = nullptr);

/// The kernel an Executor made for one node: the candidate's id and ISA, and why the candidates
/// before it in its family declined (kernel_registry.h).
struct KernelChoice {
  std::string id;
  cpu::CpuIsa isa = cpu::CpuIsa::kAvx2;
  std::vector<std::pair<std::string, std::string>> declined;  // (id, reason)
};

/// A caller's buffer that a graph output is computed in directly (zero copy) when its size is
/// known before the run; otherwise the output is computed elsewhere and the caller copies it.
struct OutputBuffer {
  int valueId = -1;
  void* data = nullptr;
  uint64_t capacity = 0;  // 0: not checked
};

/// Run memory of one execution context: the memory plan for the last input shapes (made again
/// when they change), the arena it lays intermediate tensors out in, and each node's bindings at
/// those shapes (its input pointers, output tensors, resolved output types), made with the plan
/// and reused by every run, so that a run at unchanged shapes allocates nothing of its own.
/// Used by one run at a time, with one Executor.
class ExecutorMemory {
 public:
  ExecutorMemory() = default;
  // Not copyable: the bindings point into the memory's own vectors.
  ExecutorMemory(const ExecutorMemory&) = delete;
  ExecutorMemory& operator=(const ExecutorMemory&) = delete;
  /// The plan in use (empty before the first run).
  const MemoryPlan& plan() const { return plan_; }
  /// Bytes allocated for the arena (at least plan().arenaBytes).
  uint64_t arenaCapacity() const { return capacity_; }
  /// How many times a plan was made (once per new input-shape signature).
  int planCount() const { return planCount_; }

 private:
  friend class Executor;
  struct NodeBinding {
    std::vector<const Tensor*> inputs;  // per input
    std::vector<Tensor> outputs;        // per output; views of the arena are kept between runs
    std::vector<cpu::OutputStorage> planned;  // per output: its slot (arena or caller's buffer)
    std::vector<ir::TypeInfo> outputTypes;  // resolved with the plan when typesKnown, else per run
    std::vector<std::string> outputNames;   // the graph's names of the outputs, for errors
    std::optional<cpu::KernelContext> context;  // over the vectors above
    /// Every input and output has a static shape at these input shapes: the kernel runs without
    /// shape inference while the inputs have the shapes the plan saw.
    bool typesKnown = false;
    bool inPlaceConcat = false;  // MemoryPlan::inPlaceConcat: its inputs are written in its output
  };
  const void* executor_ = nullptr;  // the Executor the bindings were made for
  std::vector<std::pair<int, Shape>> signature_;
  bool planned_ = false;
  int planCount_ = 0;
  MemoryPlan plan_;
  std::shared_ptr<uint8_t> arena_;
  uint64_t capacity_ = 0;
  std::vector<NodeBinding> nodes_;   // per step, empty when the plan failed
  std::vector<Shape> staticShapes_;  // per value id: its shape at these input shapes, when static
  std::vector<DataType> staticDtypes_;  // per value id, with staticShapes_
  std::vector<char> isStatic_;          // per value id
  // Values the caller feeds (graph inputs, outer-scope values): nodes point at these slots, which
  // hold the caller's tensors during a run and a placeholder of the same shape (no data) after it.
  std::vector<int> fedIds_;
  std::vector<Tensor> fedSlots_;
  std::vector<Tensor> fedPlaceholders_;
  std::vector<int> callerOutputRoots_;  // storage roots of graph outputs made by a node, once each
};

class KILN_INTERNAL_API Executor {
 public:
  /// How kernels are chosen without kernelIds: the first candidate that supports a node (the
  /// fastest), or the most general one (KernelRegistry::selectMostGeneral, reference runs).
  enum class KernelPolicy { kFirstSupporting, kMostGeneral };
  /// Creates a kernel for every node; throws listing all unsupported nodes.
  explicit Executor(std::shared_ptr<const ir::Graph> graph,
                    KernelPolicy policy = KernelPolicy::kFirstSupporting);
  /// The same with the kernels of `kernelIds` (as below), for a graph shared with the caller.
  Executor(std::shared_ptr<const ir::Graph> graph, const std::vector<std::string>& kernelIds,
           KernelPolicy policy);
  /// The same for a graph the caller owns alone, whose weights kernels copy are then freed: the
  /// values of a constant every reader of which keeps its own copy
  /// (KernelCreateInfo::keepsOwnCopyOf, e.g. packed weights) are replaced, as soon as its last
  /// reader's kernel is made, by a placeholder of the same dtype and shape with no data. Weights
  /// are thus never held twice, not even while loading. Only the shapes of such constants may be
  /// read afterwards.
  enum FreeCopiedWeights { kFreeCopiedWeights };
  /// `kernelIds`, when not empty, has one candidate id per node (a plan's choices, or the
  /// builder's timed tactics; "" for a node the policy chooses for): those kernels are made
  /// instead of selecting again; one missing from the registry, needing an ISA the host
  /// lacks, or declining the node is a kInvalidPlan error naming the layer, the kernel and why.
  /// `states`, when given, has one entry per node: a kernel whose entry holds a saved state is
  /// restored over it (its packed weights used where they lie) instead of packing again.
  Executor(std::shared_ptr<ir::Graph> graph, FreeCopiedWeights,
           const std::vector<std::string>& kernelIds = {},
           const std::vector<cpu::KernelState>* states = nullptr,
           KernelPolicy policy = KernelPolicy::kFirstSupporting);

  /// Runs with the graph inputs given by value id; returns the graph outputs in order. Without
  /// `memory`, every tensor is allocated on its own (control-flow bodies); with it, intermediates
  /// go to its arena and graph outputs with a buffer in `outputBuffers` are computed in place.
  /// A profiler, if given, is told each node's time.
  std::vector<Tensor> run(const std::vector<std::pair<int, Tensor>>& inputs,
                          ExecutorMemory* memory = nullptr,
                          const std::vector<OutputBuffer>& outputBuffers = {},
                          IProfiler* profiler = nullptr) const;
  /// The same, writing the graph outputs into `results` (resized, its tensors assigned): a caller
  /// that keeps `results` (and `memory`) from run to run has the run allocate nothing when the
  /// shapes are unchanged and its outputs go to `outputBuffers`, apart from what kernels allocate.
  void run(const std::vector<std::pair<int, Tensor>>& inputs, ExecutorMemory& memory,
           const std::vector<OutputBuffer>& outputBuffers, IProfiler* profiler,
           std::vector<Tensor>& results) const;

  const ir::Graph& graph() const { return *graph_; }
  /// Resolves the graph's shapes when the input shapes change (compiled with the executor).
  const ShapeProgram& shapeProgram() const { return shapes_; }

  /// Per node, in graph order: the kernel made for it.
  const std::vector<KernelChoice>& kernelChoices() const { return choices_; }
  /// Per node: its kernel's packed state (empty for a kernel that keeps none).
  std::vector<cpu::KernelState> kernelStates() const;
  /// Per node: whether its kernel keeps a state its candidate can restore from.
  bool restorable(size_t node) const { return steps_.at(node).save && steps_.at(node).restorable; }
  /// What the kernels ask of the memory plan (in-place rules, workspaces) on `threads` threads.
  KernelMemoryNeeds memoryNeeds(int threads) const;

  /// Constants every reader of which keeps its own transformed copy (see
  /// KernelCreateInfo::keepsOwnCopyOf): their values are never read at run time, only their shape.
  const std::vector<int>& constantsWithOwnCopies() const { return ownCopied_; }

 private:
  Executor(std::shared_ptr<const ir::Graph> graph, ir::Graph* freeCopiedWeightsIn,
           const std::vector<std::string>& kernelIds, const std::vector<cpu::KernelState>* states,
           KernelPolicy policy);
  struct Step {
    const ir::Node* node;
    const ir::OpSchema* schema;
    cpu::KernelFn kernel;
    cpu::WorkspaceFn workspace;              // empty: the kernel needs no scratch memory
    const cpu::KernelMemoryRules* rules;     // the candidate's, which outlives the executor
    std::vector<int> release;                // values whose last use is this step
    std::function<cpu::KernelState()> save;  // empty: no packed state
    bool restorable = false;                 // its candidate can restore a saved state
  };
  /// The candidate for node i: the one named in kernelIds, else the one policy_ picks.
  const cpu::KernelCandidate* chooseKernel(const cpu::KernelCreateInfo& info, size_t i,
                                           const std::vector<std::string>& kernelIds);
  void checkPlanFitsTheLimit(const MemoryPlan& plan, const std::vector<ir::TypeInfo>& types,
                             const std::vector<std::pair<int, Shape>>& signature) const;
  /// Plans the memory (and binds the nodes) again when the input shapes differ from the last run's.
  void preparePlan(const std::vector<std::pair<int, Tensor>>& inputs, ExecutorMemory& memory) const;
  void bindNodes(ExecutorMemory& memory, const std::vector<ir::TypeInfo>& types) const;
  /// Points graph outputs with a usable caller's buffer at it, the others at nothing.
  void placeCallerOutputs(const std::vector<std::pair<int, Tensor>>& inputs, ExecutorMemory& memory,
                          const std::vector<OutputBuffer>& outputBuffers) const;
  void runBound(const std::vector<std::pair<int, Tensor>>& inputs, ExecutorMemory& memory,
                IProfiler* profiler, std::vector<Tensor>& results) const;
  /// Every tensor on the heap (no memory, or shapes the plan could not resolve).
  void runUnplanned(const std::vector<std::pair<int, Tensor>>& inputs, IProfiler* profiler,
                    std::vector<Tensor>& results) const;

  std::shared_ptr<const ir::Graph> graph_;
  ShapeProgram shapes_;  // made before the kernels, which may free the weights they copy
  std::vector<Step> steps_;
  std::vector<bool> isNodeOutput_;  // per value id
  std::vector<std::pair<int, int>>
      producerOf_;                      // per value id: (step, output index), (-1, -1) if none
  bool hasInputsWithDefaults_ = false;  // graph inputs with a value the caller may override
  std::vector<int> ownCopied_;
  std::vector<KernelChoice> choices_;  // per step
  KernelPolicy policy_ = KernelPolicy::kFirstSupporting;
};

}  // namespace kiln
