// What the ai.onnx.ml predictors (LinearClassifier, SVMClassifier, TreeEnsembleClassifier and their
// regressors) share: the features of X as floats, the class labels, and the post_transform of the
// scores, computed as onnxruntime does (its CPU kernels are the reference these ops are tested
// against; where the spec leaves the binary case open, onnxruntime's choices are followed).
#pragma once
#include <string>
#include <vector>

#include "backends/cpu/kernel.h"
#include "ir/node_attrs.h"

namespace kiln::cpu::ml {

enum class PostTransform { kNone, kLogistic, kSoftmax, kSoftmaxZero, kProbit };

/// The node's post_transform attribute (default NONE); fails naming the node and the value.
PostTransform postTransformOf(const ir::Node& node);

/// 1 / (1 + e^-x), computed on |x| so that neither side overflows.
float logistic(float x);
/// sqrt(2) * erfinv(2p - 1) with erfinv in Winitzki's closed form (a = 0.147), the approximation
/// onnxruntime uses: within about 2e-3 of the exact normal quantile.
float probit(float p);
/// The transform of one row of `count` >= 2 scores: probit or logistic of each, a softmax, or a
/// softmax that leaves zero scores (|s| <= 1e-7) out of the sum and scales them by e^-max.
void transformRow(float* scores, int64_t count, PostTransform transform);

/// One binary score s as two columns, as onnxruntime writes them: (1 - v, v) with v = logistic(s)
/// under LOGISTIC, else (1 - s, s) when `complement` (the score is a probability) or (-s, s).
void pairBinaryScore(float s, float* z, bool complement, PostTransform transform);

/// X as (rows, cols) floats: a 1-D X is one row. Fails for another rank.
struct FeatureRows {
  int64_t rows = 0, cols = 0;
  std::vector<float> values;
  const float* row(int64_t r) const { return values.data() + r * cols; }
};
FeatureRows featureRows(KernelContext& ctx, const Tensor& x);
/// Fails, naming `what`, unless X has `expected` columns.
void checkColumns(KernelContext& ctx, const FeatureRows& x, int64_t expected, const char* what);

/// A classifier's labels: strings or int64s.
struct ClassLabels {
  std::vector<std::string> strings;
  std::vector<int64_t> ints;
  bool isString = false;
  size_t size() const { return isString ? strings.size() : ints.size(); }
};
/// From `<prefix>_strings` or the int64 attribute `intsName`; fails unless exactly one is given.
ClassLabels classLabelsOf(const ir::Node& node, const std::string& stringsName,
                          const std::string& intsName);
/// Output i: the labels tensor (rows) of the labels' type.
Tensor& allocateLabels(KernelContext& ctx, size_t i, const ClassLabels& labels, int64_t rows);
/// y[row] = labels[index].
void setLabel(Tensor& y, int64_t row, const ClassLabels& labels, size_t index);

/// A float-list attribute, or its `<name>_as_tensor` form (ai.onnx.ml 3) as doubles; empty when
/// neither is given.
std::vector<double> floatsOrTensor(const ir::Node& node, const std::string& name);

}  // namespace kiln::cpu::ml
