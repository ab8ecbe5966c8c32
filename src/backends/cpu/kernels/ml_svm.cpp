// CPU kernels of ai.onnx.ml SVMClassifier and SVMRegressor: libsvm's kernels (LINEAR, POLY, RBF,
// SIGMOID) between X and the support vectors, one-vs-one votes and Platt-coupled probabilities
// for the classifier, or liblinear's X * coefficients^T + rho when there are no support vectors;
// labels and scores as onnxruntime writes them.
#include <algorithm>
#include <cmath>
#include <memory>

#include "backends/cpu/kernels/ml_scores.h"

namespace kiln::cpu {
namespace {

using ml::PostTransform;

enum class SvmKernel { kLinear, kPoly, kRbf, kSigmoid };

struct SvmCore {
  SvmKernel kernel = SvmKernel::kLinear;
  float gamma = 0, coef0 = 0, degree = 0;
  std::vector<float> vectors;  // (count, features): support vectors, or liblinear's coefficients
  int64_t count = 0, features = 0;

  /// out[v] = K(x, vector v) for every vector; `offset` is added to LINEAR products.
  void apply(const float* x, float* out, float offset) const {
    for (int64_t v = 0; v < count; ++v) {
      const float* sv = vectors.data() + v * features;
      float sum = 0;
      if (kernel == SvmKernel::kRbf) {
        for (int64_t k = 0; k < features; ++k) sum += (x[k] - sv[k]) * (x[k] - sv[k]);
        out[v] = std::exp(-gamma * sum);
        continue;
      }
      for (int64_t k = 0; k < features; ++k) sum += x[k] * sv[k];
      if (kernel == SvmKernel::kLinear)
        out[v] = sum + offset;
      else if (kernel == SvmKernel::kPoly)
        out[v] = std::pow(gamma * sum + coef0, degree);
      else
        out[v] = std::tanh(gamma * sum + coef0);
    }
  }
};

SvmKernel svmKernelOf(const ir::Node& node) {
  const std::string name = ir::attrString(node, "kernel_type", "LINEAR");
  if (name == "LINEAR") return SvmKernel::kLinear;
  if (name == "POLY") return SvmKernel::kPoly;
  if (name == "RBF") return SvmKernel::kRbf;
  if (name == "SIGMOID") return SvmKernel::kSigmoid;
  ir::failNode(node,
               "attribute 'kernel_type' is '" + name + "'; expected LINEAR, POLY, RBF or SIGMOID");
}

/// The kernel and its vectors: `vectorCount` support vectors, or (0) liblinear's coefficient rows.
SvmCore svmCoreOf(const ir::Node& node, int64_t vectorCount, int64_t linearRows) {
  SvmCore core;
  const std::vector<float> params = ir::attrFloats(node, "kernel_params", {});
  if (!params.empty() && params.size() != 3)
    ir::failNode(node, "attribute 'kernel_params' must hold gamma, coef0 and degree, got " +
                           std::to_string(params.size()) + " values");
  if (params.size() == 3) core.gamma = params[0], core.coef0 = params[1], core.degree = params[2];
  if (vectorCount > 0) {
    core.kernel = svmKernelOf(node);
    core.vectors = ir::attrFloats(node, "support_vectors");
    core.count = vectorCount;
  } else {
    core.vectors = ir::attrFloats(node, "coefficients");
    core.count = linearRows;
  }
  if (core.count <= 0 || core.vectors.size() % static_cast<size_t>(core.count) != 0 ||
      core.vectors.empty())
    ir::failNode(node, std::string(vectorCount > 0 ? "support_vectors" : "coefficients") + " (" +
                           std::to_string(core.vectors.size()) +
                           " values) are not a whole number of " + std::to_string(core.count) +
                           " rows");
  core.features = static_cast<int64_t>(core.vectors.size()) / core.count;
  return core;
}

struct SvmClassifier {
  SvmCore core;
  ml::ClassLabels labels;
  std::vector<int64_t> perClass, firstVector;
  std::vector<float> coefficients, rho, probA, probB;
  PostTransform transform = PostTransform::kNone;
  bool svc = false, allPositive = true;
  int64_t classes = 0, pairs = 0;
};

std::shared_ptr<SvmClassifier> svmClassifierOf(const ir::Node& node) {
  auto m = std::make_shared<SvmClassifier>();
  m->labels = ml::classLabelsOf(node, "classlabels_strings", "classlabels_ints");
  m->classes = static_cast<int64_t>(m->labels.size());
  m->pairs = m->classes * (m->classes - 1) / 2;
  m->perClass = ir::attrInts(node, "vectors_per_class", {});
  m->coefficients = ir::attrFloats(node, "coefficients");
  m->rho = ir::attrFloats(node, "rho");
  m->probA = ir::attrFloats(node, "prob_a", {});
  m->probB = ir::attrFloats(node, "prob_b", {});
  m->transform = ml::postTransformOf(node);
  int64_t vectors = 0;
  for (int64_t n : m->perClass) {
    if (n < 0) ir::failNode(node, "attribute 'vectors_per_class' has a negative count");
    m->firstVector.push_back(vectors);
    vectors += n;
  }
  m->svc = vectors > 0;
  m->core = svmCoreOf(node, vectors, m->classes);
  m->allPositive =
      std::all_of(m->coefficients.begin(), m->coefficients.end(), [](float c) { return c >= 0; });
  if (m->probA.size() != m->probB.size())
    ir::failNode(node, "attributes 'prob_a' and 'prob_b' differ in length");
  if (m->svc) {
    if (static_cast<int64_t>(m->perClass.size()) != m->classes)
      ir::failNode(node, "attribute 'vectors_per_class' has " + std::to_string(m->perClass.size()) +
                             " entries for " + std::to_string(m->classes) + " classes");
    if (static_cast<int64_t>(m->coefficients.size()) < (m->classes - 1) * vectors)
      ir::failNode(node, "attribute 'coefficients' needs (classes - 1) * vectors = " +
                             std::to_string((m->classes - 1) * vectors) + " values");
    if (static_cast<int64_t>(m->rho.size()) < m->pairs)
      ir::failNode(node, "attribute 'rho' needs one value per class pair (" +
                             std::to_string(m->pairs) + ")");
    if (!m->probA.empty() && static_cast<int64_t>(m->probA.size()) < m->pairs)
      ir::failNode(node, "attributes 'prob_a' / 'prob_b' need one value per class pair (" +
                             std::to_string(m->pairs) + ")");
  } else if (m->rho.empty()) {
    ir::failNode(node, "attribute 'rho' is empty");
  }
  return m;
}

/// Pairwise coupling of the one-vs-one probabilities r (classes x classes) into p (Wu, Lin and
/// Weng 2004, the iteration libsvm uses), in float as onnxruntime runs it.
void coupleProbabilities(int64_t k, const std::vector<float>& r, float* p) {
  std::vector<float> q(static_cast<size_t>(k * k), 0.0f), qp(static_cast<size_t>(k), 0.0f);
  for (int64_t i = 0; i < k; ++i) {
    p[i] = 1.0f / static_cast<float>(k);
    for (int64_t j = 0; j < k; ++j) {
      if (j == i) continue;
      q[i * k + i] += r[j * k + i] * r[j * k + i];
      q[i * k + j] = j < i ? q[j * k + i] : -r[j * k + i] * r[i * k + j];
    }
  }
  const float eps = 0.005f / static_cast<float>(k);
  for (int iter = 0; iter < 100; ++iter) {
    float pqp = 0;
    for (int64_t i = 0; i < k; ++i) {
      qp[i] = 0;
      for (int64_t j = 0; j < k; ++j) qp[i] += q[i * k + j] * p[j];
      pqp += p[i] * qp[i];
    }
    float worst = 0;
    for (int64_t i = 0; i < k; ++i) worst = std::max(worst, std::fabs(qp[i] - pqp));
    if (worst < eps) break;
    for (int64_t i = 0; i < k; ++i) {
      const float diff = (-qp[i] + pqp) / q[i * k + i];
      p[i] += diff;
      pqp = (pqp + diff * (diff * q[i * k + i] + 2 * qp[i])) / (1 + diff) / (1 + diff);
      for (int64_t j = 0; j < k; ++j) {
        qp[j] = (qp[j] + diff * q[i * k + j]) / (1 + diff);
        p[j] /= (1 + diff);
      }
    }
  }
}

/// One row: the one-vs-one decision values (pairs) and votes (classes).
void oneVsOne(const SvmClassifier& m, const float* kernels, float* decisions,
              std::vector<int64_t>& votes) {
  std::fill(votes.begin(), votes.end(), 0);
  const int64_t vectors = m.core.count;
  int64_t pair = 0;
  for (int64_t i = 0; i < m.classes; ++i) {
    for (int64_t j = i + 1; j < m.classes; ++j, ++pair) {
      double sum = 0;
      const float* ci = m.coefficients.data() + (j - 1) * vectors;  // class i's vectors vs j
      const float* cj = m.coefficients.data() + i * vectors;        // class j's vectors vs i
      for (int64_t v = m.firstVector[i]; v < m.firstVector[i] + m.perClass[i]; ++v)
        sum += ci[v] * kernels[v];
      for (int64_t v = m.firstVector[j]; v < m.firstVector[j] + m.perClass[j]; ++v)
        sum += cj[v] * kernels[v];
      sum += m.rho[pair];
      decisions[pair] = static_cast<float>(sum);
      ++votes[sum > 0 ? i : j];
    }
  }
}

KernelFn makeSvmClassifier(const KernelCreateInfo& info) {
  auto m = svmClassifierOf(info.node);
  return [m](KernelContext& ctx) {
    const ml::FeatureRows x = ml::featureRows(ctx, ctx.input(0));
    ml::checkColumns(ctx, x, m->core.features, m->svc ? "the support vectors" : "the coefficients");
    const bool proba = !m->probA.empty() && m->svc;
    // Columns: probabilities or liblinear scores per class; else the pairs' decision values
    // (two columns, (-d, d) or the post-transformed d, for two classes).
    const int64_t width = !m->svc || proba ? m->classes : (m->classes > 2 ? m->pairs : 2);
    Tensor& y = ml::allocateLabels(ctx, 0, m->labels, x.rows);
    Tensor& z = ctx.allocateOutput(1, DataType::kFloat32, {x.rows, width});
    std::vector<float> kernels(static_cast<size_t>(m->core.count)),
        decisions(static_cast<size_t>(std::max<int64_t>(m->pairs, 1)));
    std::vector<float> pairProb(static_cast<size_t>(m->classes * m->classes), 0.0f);
    std::vector<int64_t> votes(static_cast<size_t>(m->classes));
    for (int64_t r = 0; r < x.rows; ++r) {
      float* zr = z.data<float>() + r * width;
      float maxWeight = 0;
      int64_t best = 0;
      if (!m->svc) {
        m->core.apply(x.row(r), zr, m->rho[0]);
        best = std::max_element(zr, zr + width) - zr;
        maxWeight = zr[best];
      } else {
        m->core.apply(x.row(r), kernels.data(), 0);
        oneVsOne(*m, kernels.data(), decisions.data(), votes);
        best = std::max_element(votes.begin(), votes.end()) - votes.begin();
        if (proba) {
          int64_t pair = 0;
          for (int64_t i = 0; i < m->classes; ++i) {
            for (int64_t j = i + 1; j < m->classes; ++j, ++pair) {
              const float p =
                  std::clamp(1 - ml::logistic(decisions[pair] * m->probA[pair] + m->probB[pair]),
                             1e-7f, 1 - 1e-7f);
              pairProb[i * m->classes + j] = p;
              pairProb[j * m->classes + i] = 1 - p;
            }
          }
          coupleProbabilities(m->classes, pairProb, zr);
        } else if (m->classes > 2) {
          std::copy(decisions.begin(), decisions.begin() + m->pairs, zr);
        } else {
          zr[0] = decisions[0];
        }
      }
      // The label: with two classes (one pair), onnxruntime's rule on the best score.
      size_t label = static_cast<size_t>(best);
      if (m->pairs == 1 && !proba &&
          ((m->allPositive && maxWeight >= 0.5f) || (!m->allPositive && maxWeight > 0)))
        label = 1;
      ml::setLabel(y, r, m->labels, label);
      if (m->svc && !proba && m->classes <= 2) {
        // onnxruntime's two columns: (-d, d) untransformed, probit(d) alone, else the pair of
        // a probability.
        const float d = zr[0];
        if (m->transform == PostTransform::kProbit)
          zr[0] = ml::probit(d), zr[1] = 0;
        else
          ml::pairBinaryScore(d, zr, m->transform != PostTransform::kNone, m->transform);
      } else if (width > 1) {
        ml::transformRow(zr, width, m->transform);
      } else if (m->transform == PostTransform::kProbit) {
        zr[0] = ml::probit(zr[0]);
      }
    }
  };
}

KernelFn makeSvmRegressor(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  const int64_t supports = ir::attrInt(node, "n_supports", 0);
  if (supports < 0) ir::failNode(node, "attribute 'n_supports' is negative");
  if (ml::postTransformOf(node) != PostTransform::kNone)
    ir::failNode(node,
                 "attribute 'post_transform' must be NONE: the spec gives no rule for one target "
                 "(onnxruntime ignores it)",
                 ErrorCode::kUnsupportedNode);
  auto core = std::make_shared<SvmCore>(svmCoreOf(node, supports, 1));
  auto coefficients = std::make_shared<std::vector<float>>(ir::attrFloats(node, "coefficients"));
  const std::vector<float> rho = ir::attrFloats(node, "rho");
  if (rho.empty()) ir::failNode(node, "attribute 'rho' is empty");
  if (supports > 0 && static_cast<int64_t>(coefficients->size()) < supports)
    ir::failNode(node, "attribute 'coefficients' needs one value per support vector (" +
                           std::to_string(supports) + ")");
  const bool oneClass = ir::attrInt(node, "one_class", 0) != 0;
  const float offset = rho[0];
  return [core, coefficients, supports, oneClass, offset](KernelContext& ctx) {
    const ml::FeatureRows x = ml::featureRows(ctx, ctx.input(0));
    ml::checkColumns(ctx, x, core->features,
                     supports > 0 ? "the support vectors" : "the coefficients");
    Tensor& y = ctx.allocateOutput(0, DataType::kFloat32, {x.rows, 1});
    std::vector<float> kernels(static_cast<size_t>(core->count));
    for (int64_t r = 0; r < x.rows; ++r) {
      float v = 0;
      if (supports > 0) {
        core->apply(x.row(r), kernels.data(), 0);
        v = offset;
        for (int64_t s = 0; s < supports; ++s) v += (*coefficients)[s] * kernels[s];
      } else {
        core->apply(x.row(r), &v, offset);
      }
      y.data<float>()[r] = oneClass ? (v > 0 ? 1.0f : -1.0f) : v;
    }
  };
}

KILN_REGISTER_CPU_KERNEL_DOMAIN("ai.onnx.ml", "SVMClassifier", KernelFactory(makeSvmClassifier));
KILN_REGISTER_CPU_KERNEL_DOMAIN("ai.onnx.ml", "SVMRegressor", KernelFactory(makeSvmRegressor));

}  // namespace
}  // namespace kiln::cpu
