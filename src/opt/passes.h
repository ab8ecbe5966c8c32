// Graph optimization passes. Each takes a sorted, verified graph and keeps it so.
#pragma once
#include "ir/graph.h"

namespace kiln::opt {

/// Evaluates every deterministic node whose inputs are all constants (not overridable graph
/// inputs), and every Shape/Size node whose input shape is static, replacing their outputs by
/// constants; re-infers shapes after each round. Returns the number of nodes folded.
int foldConstants(ir::Graph& graph);

/// Removes nodes whose outputs nobody reads (not graph outputs). Returns the number removed.
int eliminateDeadNodes(ir::Graph& graph);

}  // namespace kiln::opt
