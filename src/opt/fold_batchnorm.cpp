// BatchNormalization (inference form) after a Conv with constant weights is an affine map per
// output channel, so it folds into the Conv: W'[m] = W[m] * s[m], B' = (B - mean) * s + beta,
// with s = scale / sqrt(var + epsilon).
#include <cmath>

#include "ir/node_attrs.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {
namespace {

// The BatchNormalization's five constant float32 inputs, or an empty vector.
std::vector<const Tensor*> batchNormConstants(const ir::Graph& g, const ir::Node& bn,
                                              int64_t channels) {
  if (bn.inputs.size() != 5 || ir::attrInt(bn, "training_mode", 0) != 0) return {};
  for (size_t k = 1; k < bn.outputs.size(); ++k) {
    if (bn.outputs[k] != ir::kNoValue) return {};  // training outputs (running mean/var) are read
  }
  std::vector<const Tensor*> params;
  for (size_t k = 1; k < 5; ++k) {
    const Tensor* t = constantValue(g, bn.inputs[k]);
    if (!t || t->dtype() != DataType::kFloat32 || t->numel() != channels) return {};
    params.push_back(t);
  }
  return params;
}

}  // namespace

int foldBatchNormIntoConv(ir::Graph& graph) {
  const auto consumers = consumersOf(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    ir::Node& conv = graph.nodes[i];
    if (!conv.domain.empty() || conv.opType != "Conv" || conv.inputs.size() < 2 ||
        conv.outputs.size() != 1)
      continue;
    const Tensor* w = constantValue(graph, conv.inputs[1]);
    const Tensor* b = conv.inputs.size() > 2 ? constantValue(graph, conv.inputs[2]) : nullptr;
    if (!w || w->dtype() != DataType::kFloat32 || w->rank() < 3) continue;
    if (conv.inputs.size() > 2 && conv.inputs[2] != ir::kNoValue && !b) continue;
    if (!onlyReadBy(graph, consumers, conv.outputs[0])) continue;
    const int bnIndex = consumers[static_cast<size_t>(conv.outputs[0])][0];
    const ir::Node& bn = graph.nodes[static_cast<size_t>(bnIndex)];
    if (!bn.domain.empty() || bn.opType != "BatchNormalization" || bn.inputs[0] != conv.outputs[0])
      continue;
    const int64_t channels = w->dim(0);
    const std::vector<const Tensor*> p = batchNormConstants(graph, bn, channels);
    if (p.empty()) continue;
    const float epsilon = ir::attrFloat(bn, "epsilon", 1e-5f);
    const float *scale = p[0]->data<float>(), *beta = p[1]->data<float>(),
                *mean = p[2]->data<float>(), *var = p[3]->data<float>();
    Tensor newW(DataType::kFloat32, w->shape());
    Tensor newB(DataType::kFloat32, Shape{channels});
    const int64_t perChannel = w->numel() / channels;
    for (int64_t m = 0; m < channels; ++m) {
      const float s = scale[m] / std::sqrt(var[m] + epsilon);
      for (int64_t k = 0; k < perChannel; ++k)
        newW.data<float>()[m * perChannel + k] = w->data<float>()[m * perChannel + k] * s;
      newB.data<float>()[m] = ((b ? b->data<float>()[m] : 0.0f) - mean[m]) * s + beta[m];
    }
    conv.inputs.resize(3);
    conv.inputs[1] = addConstant(graph, conv.name + "_folded_W", std::move(newW));
    conv.inputs[2] = addConstant(graph, conv.name + "_folded_B", std::move(newB));
    conv.outputs[0] = bn.outputs[0];
    recordFusion(conv, bn);
    removed[static_cast<size_t>(bnIndex)] = true;
  }
  return dropNodes(graph, removed);
}

}  // namespace kiln::opt
