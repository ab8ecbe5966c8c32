#include "ir/ops/reduce_axes.h"

#include "ir/node_attrs.h"
#include "ir/shape_helpers.h"

namespace kiln::ir {

bool reduceTakesAxesInput(const Node& node) {
  return node.opset >= 18 || (node.opType == "ReduceSum" && node.opset >= 13);
}

ReducePlan planReduce(const Node& node, int64_t rank,
                      const std::optional<std::vector<int64_t>>& axesInput) {
  ReducePlan plan;
  plan.keepDims = attrInt(node, "keepdims", 1) != 0;
  std::vector<int64_t> axes;
  bool noopWhenEmpty = false;
  if (reduceTakesAxesInput(node)) {
    if (axesInput) axes = *axesInput;
    noopWhenEmpty = attrInt(node, "noop_with_empty_axes", 0) != 0;
  } else {
    axes = attrInts(node, "axes", {});
  }
  plan.reduced.assign(static_cast<size_t>(rank), axes.empty() && !noopWhenEmpty);
  if (axes.empty()) return plan;
  for (int64_t axis : axes) {
    auto a = static_cast<size_t>(normalizeAxis(node, axis, rank));
    if (rank == 0) failNode(node, "a scalar has no axis " + std::to_string(axis) + " to reduce");
    if (plan.reduced[a]) failNode(node, "axis " + std::to_string(axis) + " is repeated in 'axes'");
    plan.reduced[a] = true;
  }
  return plan;
}

}  // namespace kiln::ir
