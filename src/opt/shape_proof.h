// Proving at build time that two values have the same shape when their dims are not known
// numbers: each dim is traced back through the ops that pass it along unchanged (MatMul's rows,
// elementwise ops, Transpose, LayerNormalization, and Reshape to a shape read from another value
// with Shape/Gather/Slice/Concat) to where it was decided. Two dims that trace back to the same
// place, or to the same named symbol, are equal on every run.
#pragma once
#include "ir/graph.h"

namespace kiln::opt {

/// Whether a and b have the same rank and, dim by dim, equal known values, the same symbol, or
/// the same origin in the graph.
bool provablySameShape(const ir::Graph& graph, int a, int b);

/// Whether dim axisA of a and dim axisB of b are equal on every run, as above.
bool provablySameDim(const ir::Graph& graph, int a, int64_t axisA, int b, int64_t axisB);

}  // namespace kiln::opt
