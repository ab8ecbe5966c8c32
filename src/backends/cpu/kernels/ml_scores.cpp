// Scores of the ai.onnx.ml predictors: post_transform, labels, features (see ml_scores.h).
#include "backends/cpu/kernels/ml_scores.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::cpu::ml {

PostTransform postTransformOf(const ir::Node& node) {
  const std::string name = ir::attrString(node, "post_transform", "NONE");
  if (name == "NONE") return PostTransform::kNone;
  if (name == "LOGISTIC") return PostTransform::kLogistic;
  if (name == "SOFTMAX") return PostTransform::kSoftmax;
  if (name == "SOFTMAX_ZERO") return PostTransform::kSoftmaxZero;
  if (name == "PROBIT") return PostTransform::kProbit;
  ir::failNode(node, "attribute 'post_transform' is '" + name +
                         "'; expected NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO or PROBIT");
}

float logistic(float x) {
  const float v = 1.0f / (1.0f + std::exp(-std::fabs(x)));
  return x < 0 ? 1.0f - v : v;
}

float probit(float p) {
  constexpr float a = 0.147f;
  const float x = 2 * p - 1;
  const float sign = x < 0 ? -1.0f : 1.0f;
  const float ln = std::log((1 - x) * (1 + x));
  const float first = 2 / (static_cast<float>(M_PI) * a) + 0.5f * ln;
  const float erfinv = sign * std::sqrt(-first + std::sqrt(first * first - ln / a));
  return static_cast<float>(M_SQRT2) * erfinv;
}

namespace {

float rowMax(const float* s, int64_t count) {
  float best = -std::numeric_limits<float>::max();
  for (int64_t i = 0; i < count; ++i) best = std::max(best, s[i]);
  return best;
}

void softmax(float* s, int64_t count) {
  const float top = rowMax(s, count);
  float sum = 0;
  for (int64_t i = 0; i < count; ++i) sum += (s[i] = std::exp(s[i] - top));
  for (int64_t i = 0; i < count; ++i) s[i] /= sum;
}

void softmaxZero(float* s, int64_t count) {
  constexpr float zero = 1e-7f;
  const float top = rowMax(s, count);
  const float scale = std::exp(-top);
  float sum = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (std::fabs(s[i]) > zero)
      sum += (s[i] = std::exp(s[i] - top));
    else
      s[i] *= scale;
  }
  for (int64_t i = 0; i < count; ++i) s[i] /= sum;
}

}  // namespace

void transformRow(float* scores, int64_t count, PostTransform transform) {
  switch (transform) {
    case PostTransform::kNone:
      return;
    case PostTransform::kLogistic:
      for (int64_t i = 0; i < count; ++i) scores[i] = logistic(scores[i]);
      return;
    case PostTransform::kProbit:
      for (int64_t i = 0; i < count; ++i) scores[i] = probit(scores[i]);
      return;
    case PostTransform::kSoftmax:
      softmax(scores, count);
      return;
    case PostTransform::kSoftmaxZero:
      softmaxZero(scores, count);
      return;
  }
}

void pairBinaryScore(float s, float* z, bool complement, PostTransform transform) {
  if (transform == PostTransform::kLogistic) {
    const float v = logistic(s);
    z[0] = 1 - v, z[1] = v;
  } else {
    z[0] = complement ? 1 - s : -s, z[1] = s;
  }
}

FeatureRows featureRows(KernelContext& ctx, const Tensor& x) {
  if (x.rank() != 1 && x.rank() != 2)
    ctx.fail("X must be (N, features) or (features), got " + x.describe(),
             ErrorCode::kInvalidArgument);
  FeatureRows f;
  f.rows = x.rank() == 1 ? 1 : x.dim(0);
  f.cols = x.rank() == 1 ? x.dim(0) : x.dim(1);
  f.values.resize(static_cast<size_t>(x.numel()));
  if (x.dtype() == DataType::kFloat32)
    std::copy(x.data<float>(), x.data<float>() + x.numel(), f.values.begin());
  else
    for (int64_t i = 0; i < x.numel(); ++i) f.values[i] = static_cast<float>(x.doubleAt(i));
  return f;
}

void checkColumns(KernelContext& ctx, const FeatureRows& x, int64_t expected, const char* what) {
  if (x.cols != expected)
    ctx.fail("X has " + std::to_string(x.cols) + " features but " + what + " hold " +
                 std::to_string(expected),
             ErrorCode::kInvalidArgument);
}

ClassLabels classLabelsOf(const ir::Node& node, const std::string& stringsName,
                          const std::string& intsName) {
  ClassLabels labels;
  const bool strings = ir::hasAttr(node, stringsName), ints = ir::hasAttr(node, intsName);
  if (strings == ints)
    ir::failNode(
        node, "needs exactly one of the attributes '" + stringsName + "' and '" + intsName + "'");
  labels.isString = strings;
  if (strings)
    labels.strings = ir::attrStrings(node, stringsName);
  else
    labels.ints = ir::attrInts(node, intsName);
  if (labels.size() == 0)
    ir::failNode(node, "attribute '" + (strings ? stringsName : intsName) + "' lists no class");
  return labels;
}

Tensor& allocateLabels(KernelContext& ctx, size_t i, const ClassLabels& labels, int64_t rows) {
  return ctx.allocateOutput(i, labels.isString ? DataType::kString : DataType::kInt64, {rows});
}

void setLabel(Tensor& y, int64_t row, const ClassLabels& labels, size_t index) {
  if (labels.isString)
    y.data<std::string>()[row] = labels.strings[index];
  else
    y.data<int64_t>()[row] = labels.ints[index];
}

std::vector<double> floatsOrTensor(const ir::Node& node, const std::string& name) {
  if (ir::hasAttr(node, name + "_as_tensor")) {
    if (ir::hasAttr(node, name))
      ir::failNode(node, "gives both '" + name + "' and '" + name + "_as_tensor'");
    const Tensor& t = ir::attrTensor(node, name + "_as_tensor");
    std::vector<double> v(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.doubleAt(i);
    return v;
  }
  if (!ir::hasAttr(node, name)) return {};
  const std::vector<float> f = ir::attrFloats(node, name);
  return std::vector<double>(f.begin(), f.end());
}

}  // namespace kiln::cpu::ml
