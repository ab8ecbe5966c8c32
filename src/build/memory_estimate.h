// Activation memory of a graph whose shapes are concrete: the peak of the intermediate tensors
// alive at once when each is freed after its last use (what the arena planner will lay out).
#pragma once
#include <cstdint>

#include "ir/graph.h"

namespace kiln::build {

uint64_t peakIntermediateBytes(const ir::Graph& graph);

}  // namespace kiln::build
