// What the layout passes (nchwc_layout.cpp, nhwc_int8_layout.cpp) share: they visit the nodes in
// topological order, convert those they can to the other layout (each converted output a new
// value, the original waiting for a reader that needs it), and make the original form of a value
// only before its first such reader or a graph output.
#pragma once
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/op_schema.h"

namespace kiln::opt {

class LayoutRewriter {
 public:
  explicit LayoutRewriter(ir::Graph& graph) : g_(graph) {
    for (const ir::Node& node : graph.nodes) nodeNames_.insert(node.name);
  }
  virtual ~LayoutRewriter() = default;

  /// Rewrites the graph; returns the number of nodes converted.
  int run() {
    std::vector<ir::Node> nodes = std::move(g_.nodes);
    g_.nodes.clear();
    for (ir::Node& node : nodes) {
      if (convert(node)) {
        ++converted_;
      } else {
        for (int id : node.inputs) requireOriginal(id);
      }
      out_.push_back(std::move(node));
    }
    for (int id : g_.outputs) requireOriginal(id);
    g_.nodes = std::move(out_);
    if (converted_ > 0) {
      ir::sortTopologically(g_);
      ir::inferShapes(g_);
      ir::verifyGraph(g_);
    }
    return converted_;
  }

 protected:
  /// Converts the node in place (its inputs and output 0 the other layout's values); false when
  /// it stays as it is.
  virtual bool convert(ir::Node& node) = 0;
  /// Emits the node that makes the original form of a converted node's output, the first time a
  /// node that reads it unconverted (or the graph's outputs) asks.
  virtual void requireOriginal(int id) = 0;

  /// A new value of `dtype` named after base; shapes come from inferShapes at the end.
  int newValue(const std::string& base, DataType dtype) {
    std::string name = base;
    for (int k = 1; g_.findValue(name) >= 0; ++k) name = base + "_" + std::to_string(k);
    return g_.addValue(name, ir::TypeInfo{dtype, std::nullopt});
  }

  std::string newNodeName(const std::string& base) {
    std::string name = base;
    for (int k = 1; nodeNames_.count(name); ++k) name = base + "_" + std::to_string(k);
    nodeNames_.insert(name);
    return name;
  }

  ir::Graph& g_;
  std::vector<ir::Node> out_;  // the rewritten nodes, in order

 private:
  std::set<std::string> nodeNames_;
  int converted_ = 0;
};

}  // namespace kiln::opt
