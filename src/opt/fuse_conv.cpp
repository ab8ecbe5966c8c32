// Conv [+ Add(residual)] [+ activation] -> kiln::FusedConv, whose kernel applies bias, residual
// and activation to each output block while it is in cache instead of in separate passes.
#include "opt/activation_match.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {

int fuseConvEpilogues(ir::Graph& graph) {
  const auto consumers = consumersOf(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    ir::Node& conv = graph.nodes[i];
    if (!conv.domain.empty() || conv.opType != "Conv" || conv.outputs.size() != 1 || removed[i])
      continue;
    if (!isFloat32(graph, conv.outputs[0]) || conv.inputs.size() < 2) continue;
    int out = conv.outputs[0];
    ir::Node fused = conv;
    fused.domain = "kiln";
    fused.opType = "FusedConv";
    fused.opset = 1;
    fused.inputs.resize(3, ir::kNoValue);
    bool changed = false;
    // A residual Add of a same-shaped tensor (ResNet and MobileNetV2 blocks).
    if (onlyReadBy(graph, consumers, out)) {
      const int addIndex = consumers[static_cast<size_t>(out)][0];
      const ir::Node& add = graph.nodes[static_cast<size_t>(addIndex)];
      if (!removed[static_cast<size_t>(addIndex)] && add.domain.empty() && add.opType == "Add" &&
          add.inputs.size() == 2 && add.inputs[0] != add.inputs[1]) {
        const int z = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
        if (isFloat32(graph, z) && sameKnownShape(graph, z, out) &&
            sameKnownShape(graph, add.outputs[0], out)) {
          fused.inputs.push_back(z);
          recordFusion(fused, add);
          removed[static_cast<size_t>(addIndex)] = true;
          out = add.outputs[0];
          changed = true;
        }
      }
    }
    if (absorbActivation(graph, consumers, removed, fused, &out)) changed = true;
    if (!changed) continue;
    fused.outputs[0] = out;
    conv = std::move(fused);
  }
  return dropNodes(graph, removed);
}

}  // namespace kiln::opt
