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

}  // namespace kiln::cpu
