// The order the fusion passes run in (see passes.h).
#include "ir/node_attrs.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {

int fuseLayers(ir::Graph& graph, const FusionOptions& options) {
  int removed = eliminateCommonSubexpressions(graph);
  removed += runInt8DataMovement(graph);
  removed += fuseQdqLayers(graph);
  removed += fuseQdqElementwise(graph);
  foldConstants(graph, true);  // the weight DQs no quantized layer took
  removed += fuseQdqLookups(graph);
  removed += cancelTransposesAndReshapes(graph);
  removed += foldBatchNormIntoConv(graph);
  trimDeadConvTaps(graph);
  removed += fuseLayerNormPattern(graph);
  removed += fuseAttention(graph);
  removed += fuseMatMulEpilogues(graph);
  removed += packAttentionProjections(graph);
  removed += fuseConvEpilogues(graph);
  if (options.nchwcLayout) {
    convertToNhwcInt8Layout(graph);
    convertToNchwcLayout(graph);
    removed += foldChannelScaleIntoNchwcConv(graph);
  }
  removed += eliminateDeadNodes(graph);
  return removed;
}

std::vector<std::string> fusedFrom(const ir::Node& node) {
  return ir::hasAttr(node, kFusedFromAttr) ? ir::attrStrings(node, kFusedFromAttr)
                                           : std::vector<std::string>{};
}

std::map<std::string, std::string> fusedNodeNames(const ir::Graph& graph) {
  std::map<std::string, std::string> into;
  for (const ir::Node& node : graph.nodes) {
    for (const std::string& name : fusedFrom(node)) {
      if (name != node.name) into[name] = node.name;
    }
  }
  return into;
}

}  // namespace kiln::opt
