// Memory planning: for one set of concrete input shapes, places every intermediate tensor of a
// graph in one arena by lifetime, so that tensors alive at the same time never overlap and
// tensors that are not share bytes. Greedy by size: the largest tensors are placed first, each
// in the smallest gap left between tensors whose lifetimes overlap its own (best fit).
//
// Not placed: graph inputs, graph outputs (and tensors whose storage a graph output shares),
// constants, strings, and tensors whose shape depends on data (they stay heap-allocated).
//
// Concats computed in place (as TensorRT does): when a Concat's axis is its outermost non-unit
// one, each input is a contiguous slab of the output. Its inputs are then placed inside the
// output's slot, each at its slab, so their producers write the result directly and the Concat
// itself copies nothing (MemoryPlan::inPlaceConcat; the executor skips its kernel).
//
// Outputs written over an input that dies at their node (same size and type), as ONNX Runtime
// does: no second slot, and the output's cache lines are already there when it is written. Which
// inputs a kernel may overwrite, and which outputs are views of their input (Reshape, Identity,
// ...), the kernels declare (cpu::KernelMemoryRules); so is each kernel's scratch memory (its
// workspace), placed in the arena for the duration of its node like any tensor.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "core/internal_api.h"
#include "engine/plan_format.h"
#include "engine/shape_program.h"
#include "ir/graph.h"
#include "kiln/tensor.h"

namespace kiln {

constexpr uint64_t kArenaAlignment = 64;

struct MemoryPlan {
  static constexpr int64_t kNotPlaced = -1;
  std::vector<int64_t>
      offsets;  // per value id: byte offset in the arena, kNotPlaced where not placed
  std::vector<uint64_t> bytes;  // per value id: size at these shapes, 0 where unknown or empty
  /// Per value id: the value whose storage it shares (itself unless its op returns a view of its
  /// input: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout; or it is computed in place).
  std::vector<int> storageOf;
  uint64_t arenaBytes = 0;
  uint64_t intermediateBytes =
      0;  // the placed and in-place tensors' sizes (64-byte aligned) added up
  int placedTensors = 0;
  /// Per node index: a Concat whose inputs are placed in its output's slot at their slabs (its
  /// output is complete once they are computed).
  std::vector<bool> inPlaceConcat;
  int inPlaceConcats = 0;
  uint64_t inPlaceConcatBytes = 0;  // bytes those Concats no longer copy per run
  /// Outputs computed in place of an input that dies at their node (elementwise ops, NchwcConv's
  /// residual): such an output's storageOf is that input's storage, and its offset the same.
  int inPlaceOutputs = 0;

  /// Per node index: where its kernel's workspace starts in the arena and its size (0: none).
  std::vector<int64_t> workspaceOffsets;
  std::vector<uint64_t> workspaceBytes;
  uint64_t largestWorkspace = 0;  // the largest of workspaceBytes

  bool placed(int id) const { return offsets[static_cast<size_t>(id)] != kNotPlaced; }
};

/// What the kernels made for a graph's nodes ask of the memory plan (Executor::memoryNeeds).
struct KernelMemoryNeeds {
  std::vector<const cpu::KernelMemoryRules*> rules;  // per node; null: none
  std::vector<cpu::WorkspaceFn> workspaces;          // per node; empty: no scratch memory
  int threads = 1;                                   // the pool the workspaces are sized for
};

/// The memory rules of the kernel the registry would choose for `node` (no rules when none
/// applies): what planMemory uses when it is not given the kernels.
KILN_INTERNAL_API cpu::KernelMemoryRules kernelMemoryRules(const ir::Graph& graph,
                                                           const ir::Node& node);

/// Plans a graph whose value types are already resolved for one set of input shapes, with the
/// kernels' rules and workspaces when given (else the registry's rules and no workspaces).
KILN_INTERNAL_API MemoryPlan planMemory(const ir::Graph& graph,
                                        const KernelMemoryNeeds* kernels = nullptr);
/// The same with the value types given apart from the graph (per value id).
KILN_INTERNAL_API MemoryPlan planMemory(const ir::Graph& graph,
                                        const std::vector<ir::TypeInfo>& types,
                                        const KernelMemoryNeeds* kernels = nullptr);

/// Resolves every value's type from the given input shapes (by value id) with the graph's shape
/// program (no copy of the graph), then plans it. Throws the shape inference error when the
/// shapes do not fit the graph. `resolvedTypes`, when given, receives those types (per value id).
KILN_INTERNAL_API MemoryPlan planMemoryForInputShapes(
    const ir::Graph& graph, const ShapeProgram& shapes,
    const std::vector<std::pair<int, Shape>>& inputShapes,
    std::vector<ir::TypeInfo>* resolvedTypes = nullptr, const KernelMemoryNeeds* kernels = nullptr);
/// The same, compiling the graph's shape program for this one call.
KILN_INTERNAL_API MemoryPlan planMemoryForInputShapes(
    const ir::Graph& graph, const std::vector<std::pair<int, Shape>>& inputShapes,
    std::vector<ir::TypeInfo>* resolvedTypes = nullptr, const KernelMemoryNeeds* kernels = nullptr);

/// A built engine's plan at the min, opt or max shapes of one optimization profile (the inputs'
/// own dims when the plan has no profiles; inputs with a default keep its shape).
KILN_INTERNAL_API MemoryPlan planMemoryAtProfile(const plan::Plan& plan, int profile,
                                                 OptProfileSelector which);

}  // namespace kiln
