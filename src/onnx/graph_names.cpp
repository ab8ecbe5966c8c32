#include "onnx/graph_names.h"

namespace kiln::onnx_import {

void collectReadNames(const onnx::GraphProto& graph, std::set<std::string>& names) {
  for (const onnx::NodeProto& node : graph.node()) {
    for (const std::string& in : node.input()) names.insert(in);
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) collectReadNames(a.g(), names);
      for (const onnx::GraphProto& g : a.graphs()) collectReadNames(g, names);
    }
  }
  for (const onnx::ValueInfoProto& out : graph.output()) names.insert(out.name());
}

void collectDefinedNames(const onnx::GraphProto& graph, std::set<std::string>& names) {
  for (const onnx::ValueInfoProto& in : graph.input()) names.insert(in.name());
  for (const onnx::TensorProto& init : graph.initializer()) names.insert(init.name());
  for (const onnx::NodeProto& node : graph.node()) {
    for (const std::string& out : node.output()) names.insert(out);
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) collectDefinedNames(a.g(), names);
      for (const onnx::GraphProto& g : a.graphs()) collectDefinedNames(g, names);
    }
  }
}

std::set<std::string> outerScopeReads(const onnx::NodeProto& node) {
  std::set<std::string> read, defined;
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.has_g()) {
      collectReadNames(a.g(), read);
      collectDefinedNames(a.g(), defined);
    }
    for (const onnx::GraphProto& g : a.graphs()) {
      collectReadNames(g, read);
      collectDefinedNames(g, defined);
    }
  }
  std::set<std::string> outer;
  for (const std::string& name : read)
    if (!name.empty() && !defined.count(name)) outer.insert(name);
  return outer;
}

}  // namespace kiln::onnx_import
