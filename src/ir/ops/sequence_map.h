// SequenceMap (opset 17) runs its body once per element of its input sequence; the schema and the
// kernel both need the element types the body produces.
#pragma once
#include <vector>

#include "ir/graph.h"

namespace kiln::ir {

/// The types of the body's outputs (one element of each output sequence): as the body declares
/// them, or where it does not say the dtype, inferred over a copy of the body whose inputs are
/// the elements of the node's inputs (`inputTypes`, implicit inputs included; nullptr: unknown).
std::vector<TypeInfo> sequenceMapElementTypes(const Node& node, const Graph& body,
                                              const std::vector<const TypeInfo*>& inputTypes);

}  // namespace kiln::ir
