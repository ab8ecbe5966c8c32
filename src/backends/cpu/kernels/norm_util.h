// Shared pieces of the normalization kernels.
#pragma once
#include <cmath>
#include <vector>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/reduce_simd.h"

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

/// LayerNormalization (or, when rms, RMSNormalization) of one float32 row of n values:
/// y = (x - mean) * invStd * scale + bias, on 8-float vectors. The sums run in 8 float lanes (each
/// adds n / 8 values, so the rounding stays near float epsilon for any row a layer norm sees) and
/// the variance is taken of the deviations, not as E[x^2] - mean^2, so a large mean does not
/// cancel.
inline RowStats layerNormRowFloat(const float* x, float* y, int64_t n, const float* scale,
                                  const float* bias, double epsilon, bool rms) {
  const int64_t vectorEnd = n / 8 * 8;
  float mean = 0.0f;
  if (!rms && n > 0) {
    Float8 acc = splat(0.0f);
    for (int64_t i = 0; i < vectorEnd; i += 8) acc += load8(x + i);
    float sum = horizontalSum(acc);
    for (int64_t i = vectorEnd; i < n; ++i) sum += x[i];
    mean = sum / static_cast<float>(n);
  }
  Float8 sq = splat(0.0f);
  const Float8 mean8 = splat(mean);
  for (int64_t i = 0; i < vectorEnd; i += 8) {
    const Float8 d = load8(x + i) - mean8;
    sq += d * d;
  }
  float sumSq = horizontalSum(sq);
  for (int64_t i = vectorEnd; i < n; ++i) sumSq += (x[i] - mean) * (x[i] - mean);
  const double var = n > 0 ? static_cast<double>(sumSq) / static_cast<double>(n) : 0.0;
  const double invStd = 1.0 / std::sqrt(var + epsilon);
  const float inv = static_cast<float>(invStd);
  const Float8 inv8 = splat(inv);
  for (int64_t i = 0; i < vectorEnd; i += 8) {
    store8(y + i, (load8(x + i) - mean8) * inv8 * load8(scale + i) + load8(bias + i));
  }
  for (int64_t i = vectorEnd; i < n; ++i) y[i] = (x[i] - mean) * inv * scale[i] + bias[i];
  return {mean, invStd};
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
    for (size_t i = 0; i < v.size(); ++i)
      t.data<T>()[i] = static_cast<T>(static_cast<ComputeType<T>>(v[i]));
  });
}

}  // namespace kiln::cpu
