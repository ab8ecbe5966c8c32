// CPU kernels of NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss. Both gather
// -input[n, target[n, d], d] per position, weight it by weight[target] (0 where target equals
// ignore_index) and reduce: "mean" divides the weighted sum by the sum of the weights used.
#include <cmath>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "ir/shape_helpers.h"

namespace kiln::cpu {
namespace {

/// The input viewed as (N, C, D) with D the product of the trailing dims.
struct LossLayout {
  int64_t n = 0, c = 0, d = 1;
};

LossLayout lossLayout(KernelContext& ctx, const Tensor& x, const Tensor& target) {
  if (x.rank() < 2)
    ctx.fail("input must have rank >= 2 (N, C, ...), got " + x.describe(),
             ErrorCode::kInvalidArgument);
  Shape expected = x.shape();
  expected.erase(expected.begin() + 1);
  if (target.shape() != expected) {
    ctx.fail("target " + target.describe() + " does not match input " + x.describe() +
                 " (expected " + shapeToString(expected) + ")",
             ErrorCode::kInvalidArgument);
  }
  LossLayout l{x.dim(0), x.dim(1), 1};
  for (size_t i = 2; i < x.rank(); ++i) l.d *= x.dim(i);
  return l;
}

/// log_softmax over axis 1 of an (N, C, D) tensor, in double.
std::vector<double> logSoftmaxAxis1(const std::vector<double>& x, const LossLayout& l) {
  std::vector<double> out(x.size());
  for (int64_t n = 0; n < l.n; ++n) {
    for (int64_t d = 0; d < l.d; ++d) {
      const int64_t base = n * l.c * l.d + d;
      double maxv = -INFINITY;
      for (int64_t c = 0; c < l.c; ++c) maxv = std::max(maxv, x[base + c * l.d]);
      double sum = 0;
      for (int64_t c = 0; c < l.c; ++c) sum += std::exp(x[base + c * l.d] - maxv);
      const double logSum = std::log(sum) + maxv;
      for (int64_t c = 0; c < l.c; ++c) out[base + c * l.d] = x[base + c * l.d] - logSum;
    }
  }
  return out;
}

template <typename T>
std::vector<double> toDoubles(const Tensor& t) {
  const T* p = t.data<T>();
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<double>(static_cast<ComputeType<T>>(p[i]));
  return v;
}

template <typename T>
void storeDoubles(const std::vector<double>& v, Tensor& t) {
  T* p = t.data<T>();
  for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<T>(static_cast<ComputeType<T>>(v[i]));
}

/// The weighted negative log-likelihood of `logProb` (N, C, D) at the target classes, reduced.
struct LossAttrs {
  std::string reduction;
  bool hasIgnore = false;
  int64_t ignoreIndex = 0;
};

LossAttrs lossAttrs(const ir::Node& node) {
  LossAttrs a;
  a.reduction = ir::attrString(node, "reduction", "mean");
  if (a.reduction != "none" && a.reduction != "sum" && a.reduction != "mean") {
    ir::failNode(node, "reduction must be none, sum or mean, got '" + a.reduction + "'");
  }
  a.hasIgnore = ir::hasAttr(node, "ignore_index");
  a.ignoreIndex = a.hasIgnore ? ir::attrInt(node, "ignore_index") : 0;
  return a;
}

template <typename T>
void nllReduce(KernelContext& ctx, const LossAttrs& attrs, const std::vector<double>& logProb,
               const LossLayout& l, const Tensor& target) {
  const std::string& reduction = attrs.reduction;
  const bool hasIgnore = attrs.hasIgnore;
  const int64_t ignoreIndex = attrs.ignoreIndex;
  std::vector<double> weight;
  if (ctx.hasInput(2)) {
    const Tensor& w = ctx.input(2);
    if (w.rank() != 1 || w.dim(0) != l.c) {
      ctx.fail("weight " + w.describe() + " must have shape [" + std::to_string(l.c) + "]",
               ErrorCode::kInvalidArgument);
    }
    weight = toDoubles<T>(w);
  }
  const int64_t count = l.n * l.d;
  std::vector<double> loss(static_cast<size_t>(count));
  double lossSum = 0, weightSum = 0;
  for (int64_t n = 0; n < l.n; ++n) {
    for (int64_t d = 0; d < l.d; ++d) {
      const int64_t i = n * l.d + d;
      const int64_t cls = target.intAt(i);
      if (hasIgnore && cls == ignoreIndex) {
        loss[i] = 0;
        continue;
      }
      if (cls < 0 || cls >= l.c) {
        ctx.fail("target value " + std::to_string(cls) + " at position " + std::to_string(i) +
                     " is outside [0, " + std::to_string(l.c) + ")",
                 ErrorCode::kInvalidArgument);
      }
      const double w = weight.empty() ? 1.0 : weight[cls];
      loss[i] = -logProb[(n * l.c + cls) * l.d + d] * w;
      lossSum += loss[i];
      weightSum += w;
    }
  }
  if (reduction == "none") {
    storeDoubles<T>(loss, ctx.allocateOutput(0, dataTypeOf<T>(), target.shape()));
    return;
  }
  double value = lossSum;
  if (reduction == "mean") {
    // Without weights and ignore_index every position counts once (numpy's mean).
    value =
        (weight.empty() && !hasIgnore) ? lossSum / static_cast<double>(count) : lossSum / weightSum;
  }
  storeDoubles<T>({value}, ctx.allocateOutput(0, dataTypeOf<T>(), {}));
}

void nllLossKernel(KernelContext& ctx, const LossAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const Tensor& target = ctx.input(1);
  const LossLayout l = lossLayout(ctx, x, target);
  dispatchFloat(x.dtype(), "NegativeLogLikelihoodLoss", [&](auto tag) {
    using T = typename decltype(tag)::type;
    nllReduce<T>(ctx, attrs, toDoubles<T>(x), l, target);
  });
}

void softmaxCrossEntropyKernel(KernelContext& ctx, const LossAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const Tensor& target = ctx.input(1);
  const LossLayout l = lossLayout(ctx, x, target);
  dispatchFloat(x.dtype(), "SoftmaxCrossEntropyLoss", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::vector<double> logProb = logSoftmaxAxis1(toDoubles<T>(x), l);
    nllReduce<T>(ctx, attrs, logProb, l, target);
    if (ctx.wantsOutput(1)) storeDoubles<T>(logProb, ctx.allocateOutput(1, x.dtype(), x.shape()));
  });
}

KILN_REGISTER_CPU_KERNEL("NegativeLogLikelihoodLoss", bindKernel(lossAttrs, nllLossKernel));
KILN_REGISTER_CPU_KERNEL("SoftmaxCrossEntropyLoss",
                         bindKernel(lossAttrs, softmaxCrossEntropyKernel));

}  // namespace
}  // namespace kiln::cpu
