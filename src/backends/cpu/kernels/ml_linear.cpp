// CPU kernels of ai.onnx.ml LinearClassifier and LinearRegressor: scores = X * coefficients^T +
// intercepts, then the label (the best class, or the sign of a single score) and post_transform,
// as onnxruntime computes them.
#include <memory>

#include "backends/cpu/kernels/ml_scores.h"

namespace kiln::cpu {
namespace {

using ml::PostTransform;

struct LinearModel {
  std::vector<float> coefficients, intercepts;
  int64_t outputs = 0, features = 0;
  PostTransform transform = PostTransform::kNone;
};

LinearModel linearModelOf(const ir::Node& node, int64_t outputs) {
  LinearModel m;
  m.coefficients = ir::attrFloats(node, "coefficients");
  m.intercepts = ir::attrFloats(node, "intercepts", {});
  m.outputs = outputs;
  m.transform = ml::postTransformOf(node);
  if (m.outputs <= 0) ir::failNode(node, "has no output column (intercepts / targets)");
  if (m.coefficients.size() % static_cast<size_t>(m.outputs) != 0)
    ir::failNode(node, "attribute 'coefficients' has " + std::to_string(m.coefficients.size()) +
                           " values, not a multiple of " + std::to_string(m.outputs) +
                           " output columns");
  if (!m.intercepts.empty() && m.intercepts.size() != static_cast<size_t>(m.outputs))
    ir::failNode(node, "attribute 'intercepts' has " + std::to_string(m.intercepts.size()) +
                           " values for " + std::to_string(m.outputs) + " output columns");
  m.features = static_cast<int64_t>(m.coefficients.size()) / m.outputs;
  return m;
}

/// scores (rows, outputs) of X.
std::vector<float> linearScores(KernelContext& ctx, const LinearModel& m, const Tensor& x,
                                int64_t& rows) {
  const ml::FeatureRows f = ml::featureRows(ctx, x);
  ml::checkColumns(ctx, f, m.features, "the coefficients");
  rows = f.rows;
  std::vector<float> scores(static_cast<size_t>(rows * m.outputs));
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = f.row(r);
    for (int64_t c = 0; c < m.outputs; ++c) {
      const float* w = m.coefficients.data() + c * m.features;
      float sum = m.intercepts.empty() ? 0.0f : m.intercepts[c];
      for (int64_t k = 0; k < m.features; ++k) sum += xr[k] * w[k];
      scores[r * m.outputs + c] = sum;
    }
  }
  return scores;
}

KernelFn makeLinearClassifier(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  auto labels = std::make_shared<ml::ClassLabels>(
      ml::classLabelsOf(node, "classlabels_strings", "classlabels_ints"));
  const int64_t classes = ir::hasAttr(node, "intercepts")
                              ? static_cast<int64_t>(ir::attrFloats(node, "intercepts").size())
                              : static_cast<int64_t>(labels->size());
  auto m = std::make_shared<LinearModel>(linearModelOf(node, classes));
  if (classes > 1 && labels->size() < static_cast<size_t>(classes))
    ir::failNode(node, std::to_string(classes) + " score columns but " +
                           std::to_string(labels->size()) + " class labels");
  return [m, labels](KernelContext& ctx) {
    int64_t rows = 0;
    std::vector<float> s = linearScores(ctx, *m, ctx.input(0), rows);
    // One score column with two labels: two score columns (ml::pairBinaryScore).
    const bool secondClass = m->outputs == 1 && labels->size() == 2;
    const int64_t width = secondClass ? 2 : m->outputs;
    Tensor& y = ml::allocateLabels(ctx, 0, *labels, rows);
    Tensor& z = ctx.allocateOutput(1, DataType::kFloat32, {rows, width});
    float* out = z.data<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const float* sr = s.data() + r * m->outputs;
      float* zr = out + r * width;
      if (m->outputs == 1) {
        // The sign picks labels[1] or labels[0]; without two labels, "1"/"0" or 1/0.
        const bool positive = sr[0] > 0;
        if (labels->size() == 2)
          ml::setLabel(y, r, *labels, positive ? 1 : 0);
        else if (labels->isString)
          y.data<std::string>()[r] = positive ? "1" : "0";
        else
          y.data<int64_t>()[r] = positive ? 1 : 0;
        if (m->transform == PostTransform::kProbit) {
          zr[0] = ml::probit(sr[0]);
          if (secondClass) zr[1] = 0;
        } else if (secondClass) {
          ml::pairBinaryScore(sr[0], zr, true, m->transform);
        } else {
          zr[0] = sr[0];
        }
        continue;
      }
      int64_t best = 0;
      for (int64_t c = 1; c < m->outputs; ++c)
        if (sr[c] > sr[best]) best = c;
      ml::setLabel(y, r, *labels, static_cast<size_t>(best));
      std::copy(sr, sr + m->outputs, zr);
      ml::transformRow(zr, m->outputs, m->transform);
    }
  };
}

KernelFn makeLinearRegressor(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  auto m = std::make_shared<LinearModel>(linearModelOf(node, ir::attrInt(node, "targets", 1)));
  return [m](KernelContext& ctx) {
    int64_t rows = 0;
    std::vector<float> s = linearScores(ctx, *m, ctx.input(0), rows);
    Tensor& y = ctx.allocateOutput(0, DataType::kFloat32, {rows, m->outputs});
    float* out = y.data<float>();
    std::copy(s.begin(), s.end(), out);
    for (int64_t r = 0; r < rows; ++r) {
      float* yr = out + r * m->outputs;
      if (m->outputs > 1)
        ml::transformRow(yr, m->outputs, m->transform);
      else if (m->transform == PostTransform::kProbit)  // one target: only PROBIT applies
        yr[0] = ml::probit(yr[0]);
    }
  };
}

KILN_REGISTER_CPU_KERNEL_DOMAIN("ai.onnx.ml", "LinearClassifier",
                                KernelFactory(makeLinearClassifier));
KILN_REGISTER_CPU_KERNEL_DOMAIN("ai.onnx.ml", "LinearRegressor",
                                KernelFactory(makeLinearRegressor));

}  // namespace
}  // namespace kiln::cpu
