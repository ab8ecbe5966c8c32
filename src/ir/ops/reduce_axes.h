// Which axes a Reduce* op reduces: from the 'axes' attribute (older opsets) or the optional
// 'axes' input (ReduceSum from opset 13, the other reductions from opset 18), with keepdims
// and noop_with_empty_axes (which reduces nothing: each output is the op applied to one
// element). Shared by shape inference and the CPU kernels.
#pragma once
#include <optional>
#include <vector>

#include "ir/graph.h"

namespace kiln::ir {

struct ReducePlan {
  std::vector<bool> reduced;  // per input axis
  bool keepDims = true;
};

/// True when this node takes its axes as input 1 rather than as an attribute.
bool reduceTakesAxesInput(const Node& node);

/// The plan for an input of the given rank; `axesInput` is the value of input 1 when the node
/// has one (nullopt when the input is omitted). Fails naming the node on bad or repeated axes.
ReducePlan planReduce(const Node& node, int64_t rank,
                      const std::optional<std::vector<int64_t>>& axesInput);

}  // namespace kiln::ir
