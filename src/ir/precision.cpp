#include "ir/precision.h"

#include "ir/node_attrs.h"

namespace kiln::ir {

std::string nodePrecision(const Node& node) { return attrString(node, kPrecisionAttr, ""); }

std::string layerPrecision(const Graph& graph, const Node& node) {
  if (std::string p = nodePrecision(node); !p.empty()) return p;
  const int out = node.outputs.empty() ? kNoValue : node.outputs[0];
  const DataType type = out == kNoValue ? DataType::kUndefined : graph.value(out).type.dtype;
  switch (type) {
    case DataType::kFloat32:
      return kPrecisionFp32;
    case DataType::kFloat16:
      return kPrecisionFp16;
    case DataType::kBFloat16:
      return kPrecisionBf16;
    default:
      return dataTypeName(type);
  }
}

}  // namespace kiln::ir
