// Parsing of Einsum equations ("bij,bjk->bik", "...ii->...i", implicit outputs) into label ids
// per axis, with the ellipsis expanded for the given input ranks. Shared by shape inference
// and the CPU kernel.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::ir {

struct EinsumEquation {
  std::vector<std::vector<int>> inputLabels;  // per input, the label of each axis
  std::vector<int> outputLabels;              // the label of each output axis (all distinct)
  int labelCount = 0;                         // labels are 0 .. labelCount-1
};

/// Fails naming the node when the equation is malformed or does not match the input ranks.
EinsumEquation parseEinsum(const Node& node, const std::string& equation,
                           const std::vector<int64_t>& inputRanks);

}  // namespace kiln::ir
