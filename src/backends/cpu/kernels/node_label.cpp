#include "backends/cpu/kernels/node_label.h"

namespace kiln::cpu {

ir::Node nodeLabel(const ir::Node& node) {
  ir::Node label;
  label.name = node.name;
  label.opType = node.opType;
  label.domain = node.domain;
  label.opset = node.opset;
  return label;
}

ir::Node nodeLabelWithAttrs(const ir::Node& node, std::initializer_list<const char*> names) {
  ir::Node label = nodeLabel(node);
  for (const char* name : names) {
    auto it = node.attrs.find(name);
    if (it != node.attrs.end()) label.attrs.emplace(it->first, it->second);
  }
  return label;
}

}  // namespace kiln::cpu
