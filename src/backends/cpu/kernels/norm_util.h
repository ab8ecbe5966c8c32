// Shared pieces of the normalization kernels.
#pragma once
#include <cmath>
#include <vector>

#include "backends/cpu/kernels/elementwise_util.h"

namespace kiln::cpu {

struct RowStats {
  double mean = 0;
  double invStd = 0;  // 1 / sqrt(variance + epsilon)
};

/// Mean and inverse standard deviation (population variance) of n values, accumulated in double.
template <typename T>
RowStats rowStats(const T* x, int64_t n, double epsilon) {
  using C = ComputeType<T>;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(C(x[i]));
  const double mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(C(x[i])) - mean;
    sq += d * d;
  }
  const double var = n > 0 ? sq / static_cast<double>(n) : 0.0;
  return {mean, 1.0 / std::sqrt(var + epsilon)};
}

/// RMSNormalization's statistics: mean 0 and 1 / sqrt(mean of squares + epsilon).
template <typename T>
RowStats rmsStats(const T* x, int64_t n, double epsilon) {
  using C = ComputeType<T>;
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(C(x[i]));
    sq += v * v;
  }
  return {0.0, 1.0 / std::sqrt((n > 0 ? sq / static_cast<double>(n) : 0.0) + epsilon)};
}

/// y = x * a + b over n values, computed in ComputeType<T>.
template <typename T>
void affineRun(const T* x, T* y, int64_t n, double a, double b) {
  using C = ComputeType<T>;
  const C ca = static_cast<C>(a);
  const C cb = static_cast<C>(b);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(C(x[i]) * ca + cb);
}

/// A float tensor's values as doubles (small parameter tensors).
inline std::vector<double> tensorToDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.doubleAt(i);
  return v;
}

/// Writes doubles into a float tensor of any float dtype (per-row or per-channel statistics).
inline void storeDoubles(Tensor& t, const std::vector<double>& v) {
  dispatchFloat(t.dtype(), "statistics output", [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t i = 0; i < v.size(); ++i) t.data<T>()[i] = static_cast<T>(static_cast<ComputeType<T>>(v[i]));
  });
}

}  // namespace kiln::cpu
