#include "build/int8_report.h"

#include "ir/node_attrs.h"
#include "opt/passes.h"

namespace kiln::build {

std::vector<std::string> int8LayerReport(const ir::Graph& graph,
                                         const std::vector<LayerInfo>& layers) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < graph.nodes.size() && i < layers.size(); ++i) {
    const ir::Node& n = graph.nodes[i];
    if (n.domain == "kiln" && (n.opType == "QConv" || n.opType == "QGemm")) {
      const ir::Value& y = graph.value(n.outputs[0]);
      std::string line = "INT8  layer '" + n.name + "' runs as kiln::" + n.opType + ", kernel " +
                         layers[i].kernel + ", " + dataTypeName(y.type.dtype) + " output";
      if (ir::hasAttr(n, opt::kInt8FloatOutputAttr))
        line += " (" + ir::attrString(n, opt::kInt8FloatOutputAttr) + ")";
      std::string from;
      for (const std::string& f : layers[i].fusedFrom) from += (from.empty() ? "" : ", ") + f;
      if (!from.empty()) line += "; fused from " + from;
      lines.push_back(std::move(line));
    } else if (ir::hasAttr(n, opt::kInt8RefusalAttr)) {
      lines.push_back("FP32  layer '" + n.name + "' (" + n.opType +
                      ") does not run INT8: " + ir::attrString(n, opt::kInt8RefusalAttr));
    }
  }
  return lines;
}

}  // namespace kiln::build
