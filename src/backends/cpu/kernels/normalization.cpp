// CPU kernel for BatchNormalization: inference with running statistics, or (opset 14+,
// training_mode=1) with batch statistics plus the updated running mean and variance.
#include <cmath>

#include "backends/cpu/kernels/norm_util.h"

namespace kiln::cpu {
namespace {

// y = x * scale[p] + shift[p] with x viewed as [outer, params, inner].
template <typename T>
void applyAffine(const Tensor& x, Tensor& y, const std::vector<double>& scale,
                 const std::vector<double>& shift, int64_t inner) {
  const int64_t params = static_cast<int64_t>(scale.size());
  const int64_t outer = x.numel() / std::max<int64_t>(1, params * inner);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t p = 0; p < params; ++p) {
      const int64_t base = (o * params + p) * inner;
      affineRun(x.data<T>() + base, y.data<T>() + base, inner, scale[static_cast<size_t>(p)],
                shift[static_cast<size_t>(p)]);
    }
  }
}

// Per-parameter mean and population variance over the outer and inner dims.
template <typename T>
void batchStats(const Tensor& x, int64_t params, int64_t inner, std::vector<double>& mean,
                std::vector<double>& var) {
  using C = ComputeType<T>;
  const int64_t outer = x.numel() / std::max<int64_t>(1, params * inner);
  const T* src = x.data<T>();
  mean.assign(static_cast<size_t>(params), 0.0);
  var.assign(static_cast<size_t>(params), 0.0);
  const double count = static_cast<double>(outer * inner);
  for (int64_t p = 0; p < params; ++p) {
    double sum = 0;
    for (int64_t o = 0; o < outer; ++o) {
      const T* row = src + (o * params + p) * inner;
      for (int64_t i = 0; i < inner; ++i) sum += static_cast<double>(C(row[i]));
    }
    const double m = sum / count;
    double sq = 0;
    for (int64_t o = 0; o < outer; ++o) {
      const T* row = src + (o * params + p) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        const double d = static_cast<double>(C(row[i])) - m;
        sq += d * d;
      }
    }
    mean[static_cast<size_t>(p)] = m;
    var[static_cast<size_t>(p)] = sq / count;
  }
}

KernelFn makeBatchNorm(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  const double epsilon = ir::attrFloat(node, "epsilon", 1e-5f);
  const double momentum = ir::attrFloat(node, "momentum", 0.9f);
  const bool training = node.opset >= 14 && ir::attrInt(node, "training_mode", 0) != 0;
  return [epsilon, momentum, training](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const int64_t channels = x.dim(1);
    const int64_t perActivation = x.numel() / std::max<int64_t>(1, x.dim(0));
    std::vector<double> scale = tensorToDoubles(ctx.input(1));
    std::vector<double> bias = tensorToDoubles(ctx.input(2));
    std::vector<double> mean = tensorToDoubles(ctx.input(3));
    std::vector<double> var = tensorToDoubles(ctx.input(4));
    // Parameters are per channel, or per activation (C x D1 x ... with spatial=0 before opset 9).
    const int64_t params = static_cast<int64_t>(scale.size());
    if (params != channels && params != perActivation) {
      ctx.fail("scale has " + std::to_string(params) + " values for " + std::to_string(channels) +
                   " channels",
               ErrorCode::kInvalidArgument);
    }
    if (static_cast<int64_t>(bias.size()) != params ||
        static_cast<int64_t>(mean.size()) != params || static_cast<int64_t>(var.size()) != params) {
      ctx.fail("scale, B, mean and var must have the same size", ErrorCode::kInvalidArgument);
    }
    const int64_t inner =
        params == channels ? x.numel() / std::max<int64_t>(1, x.dim(0) * channels) : 1;
    std::vector<double> useMean = mean;
    std::vector<double> useVar = var;
    if (training) {
      dispatchFloat(x.dtype(), "BatchNormalization", [&](auto tag) {
        using T = typename decltype(tag)::type;
        batchStats<T>(x, params, inner, useMean, useVar);
      });
    }
    std::vector<double> a(scale.size()), b(scale.size());
    for (size_t p = 0; p < scale.size(); ++p) {
      a[p] = scale[p] / std::sqrt(useVar[p] + epsilon);
      b[p] = bias[p] - useMean[p] * a[p];
    }
    Tensor& y = ctx.output(0);
    dispatchFloat(x.dtype(), "BatchNormalization", [&](auto tag) {
      using T = typename decltype(tag)::type;
      applyAffine<T>(x, y, a, b, inner);
    });
    if (training) {
      for (size_t p = 0; p < mean.size(); ++p) {
        mean[p] = mean[p] * momentum + useMean[p] * (1 - momentum);
        var[p] = var[p] * momentum + useVar[p] * (1 - momentum);
      }
      if (ctx.wantsOutput(1)) storeDoubles(ctx.output(1), mean);
      if (ctx.wantsOutput(2)) storeDoubles(ctx.output(2), var);
    }
  };
}

KILN_REGISTER_CPU_KERNEL("BatchNormalization", KernelFactory(makeBatchNorm));

}  // namespace
}  // namespace kiln::cpu
