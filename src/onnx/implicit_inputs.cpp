#include "onnx/implicit_inputs.h"

#include <algorithm>
#include <set>
#include <string>

#include "kiln/error.h"

namespace kiln::onnx_import {

namespace {

std::vector<ir::Graph*> subgraphsOf(ir::Node& node) {
  std::vector<ir::Graph*> graphs;
  for (auto& [name, attr] : node.attrs) {
    if (auto* g = std::get_if<std::shared_ptr<ir::Graph>>(&attr)) graphs.push_back(g->get());
    if (auto* list = std::get_if<std::vector<std::shared_ptr<ir::Graph>>>(&attr))
      for (auto& g : *list) graphs.push_back(g.get());
  }
  return graphs;
}

std::vector<bool> definedValues(const ir::Graph& g) {
  std::vector<bool> defined(g.values.size(), false);
  for (size_t i = 0; i < g.values.size(); ++i) defined[i] = g.values[i].constant.has_value();
  for (int id : g.inputs) defined[id] = true;
  for (const ir::Node& node : g.nodes)
    for (int id : node.outputs)
      if (id != ir::kNoValue) defined[id] = true;
  return defined;
}

// Gives each node with subgraphs its implicit inputs (the union of its subgraphs' free names, in
// order of first use); returns g's own free values: read by a node or listed as an output, but
// defined by neither an input, a constant nor a node of g.
std::vector<int> resolveGraph(ir::Graph& g) {
  for (ir::Node& node : g.nodes) {
    std::vector<ir::Graph*> subgraphs = subgraphsOf(node);
    if (subgraphs.empty()) continue;
    std::vector<std::string> names;
    for (ir::Graph* sub : subgraphs) {
      for (int id : resolveGraph(*sub)) {
        const std::string& name = sub->value(id).name;
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
      }
    }
    node.explicitInputs = static_cast<int>(node.inputs.size());
    for (const std::string& name : names) node.inputs.push_back(g.valueId(name));
    for (ir::Graph* sub : subgraphs) {
      std::vector<bool> defined = definedValues(*sub);
      sub->outerInputs.clear();
      for (const std::string& name : names) {
        int id = sub->findValue(name);
        sub->outerInputs.push_back(id != ir::kNoValue && !defined[id] ? id : ir::kNoValue);
      }
    }
  }
  std::vector<bool> defined = definedValues(g);
  std::vector<int> free;
  std::set<int> seen;
  auto use = [&](int id) {
    if (id != ir::kNoValue && !defined[id] && seen.insert(id).second) free.push_back(id);
  };
  for (const ir::Node& node : g.nodes)
    for (int id : node.inputs) use(id);
  for (int id : g.outputs) use(id);
  return free;
}

void sortSubgraphs(ir::Graph& g) {
  for (ir::Node& node : g.nodes) {
    for (ir::Graph* sub : subgraphsOf(node)) {
      sortSubgraphs(*sub);
      try {
        ir::sortTopologically(*sub);
        ir::verifyGraph(*sub);
      } catch (const Error& e) {
        throw Error(e.code(), node.label() + " subgraph '" + sub->name + "': " + e.what());
      }
    }
  }
}

}  // namespace

void resolveImplicitInputs(ir::Graph& mainGraph) {
  resolveGraph(mainGraph);
  std::vector<bool> defined = definedValues(mainGraph);
  for (const ir::Node& node : mainGraph.nodes) {
    for (size_t k = node.numExplicitInputs(); k < node.inputs.size(); ++k) {
      if (!defined[node.inputs[k]]) {
        throw Error(ErrorCode::kInvalidModel, node.label() + ": a subgraph reads tensor '" +
                                                  mainGraph.value(node.inputs[k]).name +
                                                  "', which no enclosing graph defines");
      }
    }
  }
  sortSubgraphs(mainGraph);
}

}  // namespace kiln::onnx_import
