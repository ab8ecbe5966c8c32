// Shape programs: how the runtime resolves every shape of a graph for new input shapes without
// copying the graph or running an optimization pass.
//
// When an Executor is made, the nodes whose outputs depend only on the shapes of the graph's
// inputs (Shape and Size, and the Gather / Concat / Unsqueeze / Cast / arithmetic / Range ... over
// them and over constants that compute the sizes fed to Reshape, Expand, Tile, ConstantOfShape,
// Resize ...) are compiled into an ordered list of steps, each with its CPU kernel. resolve()
// runs shape inference over a table of types of its own, node by node, and evaluates each step
// as inference reaches it (a Shape step reads the shape just inferred for its input), so that
// the values the steps compute are known to the inference of the nodes after them. The steps
// run on tiny tensors: a step whose output would exceed kMaxShapeValueElements is left to run
// time (its output's type is still inferred).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "backends/cpu/kernel.h"
#include "core/internal_api.h"
#include "ir/graph.h"
#include "ir/op_schema.h"

namespace kiln {

class KILN_INTERNAL_API ShapeProgram {
 public:
  /// Largest output (in elements) a step computes; bigger values are data, not shapes.
  static constexpr int64_t kMaxShapeValueElements = 4096;

  /// Compiles the program of `graph`, which must outlive it. Call before an Executor frees the
  /// weights its kernels copy (Executor::kFreeCopiedWeights), as the steps' kernels read them.
  explicit ShapeProgram(const ir::Graph& graph);

  /// What resolve() found, per value id.
  struct Resolution {
    std::vector<ir::TypeInfo> types;  // every value's type at these input shapes
    std::vector<Tensor> values;       // the steps' outputs (undefined for other values)
  };
  /// Every value's type for these input shapes (by value id; sequences keep no shape), with the
  /// steps' values. Throws the shape inference error when the shapes do not fit the graph.
  Resolution resolve(const std::vector<std::pair<int, Shape>>& inputShapes) const;

  /// The nodes (indices into graph.nodes) compiled as steps, in order.
  std::vector<size_t> stepNodes() const;

 private:
  struct Step {
    size_t node;
    const ir::OpSchema* schema;
    cpu::KernelFn kernel;
  };
  /// Runs step `s` when its inputs are known and its outputs small; records its outputs.
  void evaluate(const Step& step, Resolution& r, std::vector<const Tensor*>& known) const;

  const ir::Graph& graph_;
  std::vector<Step> steps_;
  std::vector<int> stepOf_;  // per node: its index in steps_, -1 when it is not a step
};

}  // namespace kiln
