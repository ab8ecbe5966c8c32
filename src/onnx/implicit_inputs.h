// Outer-scope reads of control-flow subgraphs become explicit edges of the owning node.
#pragma once
#include "ir/graph.h"

namespace kiln::onnx_import {

/// For every node with graph attributes (recursively): appends the outer values its subgraphs
/// read to node.inputs (setting node.explicitInputs) and records them, in the same order, as
/// each subgraph's outerInputs; sorts every subgraph. Throws naming the node and the tensor when
/// a subgraph reads a name that no enclosing graph defines.
void resolveImplicitInputs(ir::Graph& mainGraph);

}  // namespace kiln::onnx_import
