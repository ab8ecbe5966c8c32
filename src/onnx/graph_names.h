// Tensor names of ONNX graphs (protobuf), subgraphs included.
#pragma once
#include <onnx/onnx_pb.h>

#include <set>
#include <string>

namespace kiln::onnx_import {

/// Every tensor name a node of the graph or of its subgraphs reads, and the graph's outputs.
void collectReadNames(const onnx::GraphProto& graph, std::set<std::string>& names);
/// Every tensor name the graph or its subgraphs define: inputs, initializers and node outputs.
void collectDefinedNames(const onnx::GraphProto& graph, std::set<std::string>& names);
/// The names a node's subgraph attributes (If branches, Loop and Scan bodies) read from the
/// scopes around the node: read there and defined nowhere inside them.
std::set<std::string> outerScopeReads(const onnx::NodeProto& node);

}  // namespace kiln::onnx_import
