// foldChannelScaleIntoNchwcConv: Mul(X, S) -> 1x1 NchwcConv becomes NchwcConv(X, ..., S), the
// conv's optional X scale (ir/ops/nchwc.h). A squeeze-excitation block ends this way: S [N, Cb, 1,
// 1, 16] is the gate, one value per channel and image, X the full map, and the 1x1 projection conv
// the Mul's only reader. The kernel then scales its Co * Ci weights per image instead of the Mul
// reading and writing all H * W * Ci values of X. The weights come from memory (a network's packed
// weights do not stay in cache from run to run) while X is usually still in L2, so a weight costs
// several X values: the fold pays where Co is well below H * W, taken as 8 * Co <= H * W. In
// EfficientNet-B0 that folds the stages at 112, 56 and 28 pixels square; at 14x14 (Co 80 and 112,
// 196 pixels) scaling the weights measured slower than the Mul.
#include <algorithm>

#include "ir/node_attrs.h"
#include "ir/ops/nchwc.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {
namespace {

constexpr size_t kScaleInput = 4;  // NchwcConv(X, W, B, Z, S)
// Folds where kWeightCostInPixels * Co <= H * W (see above).
constexpr int64_t kWeightCostInPixels = 8;

bool isKnown(const ir::Dim& d, int64_t v) { return d.isKnown() && d.value == v; }

const ir::SymShape* shapeOf(const ir::Graph& graph, int id) {
  const auto& shape = graph.value(id).type.shape;
  return shape ? &*shape : nullptr;
}

// Whether `s` is a blocked per-channel scale for the blocked map `x`: [N or 1, Cb, 1, 1, 16].
bool isChannelScaleOf(const ir::SymShape& s, const ir::SymShape& x) {
  return s.size() == 5 && x.size() == 5 && (isKnown(s[0], 1) || s[0] == x[0]) && x[1].isKnown() &&
         s[1] == x[1] && isKnown(s[2], 1) && isKnown(s[3], 1) && isKnown(s[4], ir::kNchwcBlock);
}

// A plain 1x1 NchwcConv over a blocked X with a constant W [Co, Ci, 1, 1] that has no X scale
// yet; its Co, or 0 when it is not one.
int64_t pointwiseOutChannels(const ir::Graph& graph, const ir::Node& conv) {
  if (conv.domain != "kiln" || conv.opType != "NchwcConv" || ir::attrInt(conv, "group", 1) != 1)
    return 0;
  if (conv.inputs.size() > kScaleInput && conv.inputs[kScaleInput] != ir::kNoValue) return 0;
  const Tensor* w = conv.inputs.size() > 1 ? constantValue(graph, conv.inputs[1]) : nullptr;
  if (!w || w->rank() != 4 || w->dim(2) != 1 || w->dim(3) != 1) return 0;
  return w->dim(0);
}

}  // namespace

int foldChannelScaleIntoNchwcConv(ir::Graph& graph) {
  const auto consumers = consumersOf(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& mul = graph.nodes[i];
    if (!(mul.domain.empty() || mul.domain == "ai.onnx") || mul.opType != "Mul" ||
        mul.inputs.size() != 2 || mul.outputs.size() != 1 || mul.inputs[0] == mul.inputs[1]) {
      continue;
    }
    const int out = mul.outputs[0];
    if (!isFloat32(graph, out) || !onlyReadBy(graph, consumers, out)) continue;
    ir::Node& conv = graph.nodes[static_cast<size_t>(consumers[static_cast<size_t>(out)][0])];
    const int64_t outChannels = pointwiseOutChannels(graph, conv);
    if (outChannels == 0 || conv.inputs[0] != out) continue;
    if (std::count(conv.inputs.begin(), conv.inputs.end(), out) != 1)
      continue;  // also the residual Z
    // Either operand order: X has the Mul's shape, S is per channel.
    const ir::SymShape* y = shapeOf(graph, out);
    int x = ir::kNoValue, s = ir::kNoValue;
    for (int k = 0; k < 2 && y; ++k) {
      const int a = mul.inputs[static_cast<size_t>(k)], b = mul.inputs[static_cast<size_t>(1 - k)];
      const ir::SymShape* sa = shapeOf(graph, a);
      const ir::SymShape* sb = shapeOf(graph, b);
      if (sa && sb && isFloat32(graph, a) && isFloat32(graph, b) && sameKnownShape(graph, a, out) &&
          isChannelScaleOf(*sb, *sa)) {
        x = a;
        s = b;
        break;
      }
    }
    if (x == ir::kNoValue) continue;
    const ir::SymShape& xs = *shapeOf(graph, x);
    // Scaling Co * Ci weights must cost well less than a pass over the H * W * Ci map.
    if (!xs[2].isKnown() || !xs[3].isKnown() ||
        kWeightCostInPixels * outChannels > xs[2].value * xs[3].value) {
      continue;
    }
    conv.inputs.resize(kScaleInput, ir::kNoValue);
    conv.inputs.push_back(s);
    conv.inputs[0] = x;
    recordFusion(conv, mul);
    removed[i] = true;
  }
  return dropNodes(graph, removed);
}

}  // namespace kiln::opt
