// Pictures of networks for kiln inspect --graph: Graphviz DOT text of an optimized network (a
// plan's layers: their fused ONNX nodes, kernel, layout, precision and output shapes) or of an
// ONNX model as imported, written as .dot or rendered to .svg / .png by Graphviz's `dot`.
#pragma once
#include <string>

#include "engine/plan_format.h"
#include "ir/graph.h"

namespace kiln::cli {

/// DOT of a plan: one box per layer, one ellipse per network input and output, edges labelled
/// with the tensor's dtype and shape (weights are not drawn).
std::string planToDot(const plan::Plan& plan);
/// DOT of an ONNX model's graph as kiln imports it: one box per node (name, op type, output
/// shapes).
std::string modelGraphToDot(const ir::Graph& graph);
/// Writes the DOT text to `path`: as is for .dot, rendered by `dot` for .svg and .png. Throws
/// kiln::Error naming the file for another suffix, and when `dot` is not installed or fails.
void writeGraphPicture(const std::string& dot, const std::string& path);

}  // namespace kiln::cli
