// Which nodes of a float16 graph may compute in float32 instead (see widen_float16.cpp).
#pragma once
#include <string>

#include "ir/graph.h"

namespace kiln::opt {

/// Whether the node may read and write float32 where the model gives it float16 tensors without
/// its result depending on float16 rounding: a default-domain op whose output is a continuous
/// function of its float inputs (arithmetic, activations, Conv/MatMul/Gemm, normalizations,
/// pools, reductions, recurrent layers, data movement), a Cast between float types or to
/// float16, a ConstantOfShape filling float16, and no subgraph.
/// Comparisons, Floor/Ceil/Round/Sign/Mod, IsInf/IsNaN, ArgMax/ArgMin/TopK, QuantizeLinear and a
/// Cast from float16 to a non-float type keep their float16 inputs: their results move in steps
/// that float16 rounding decides.
bool computesWideInFloat32(const ir::Graph& graph, const ir::Node& node);

}  // namespace kiln::opt
