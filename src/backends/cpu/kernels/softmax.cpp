// CPU kernels of Softmax, LogSoftmax and Hardmax. The softmax pass per row is max, then
// exp(x - max) with its sum, then a scale (or, for LogSoftmax, a shift); each loop vectorizes.
#include <cmath>
#include <vector>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/reduce_runs.h"
#include "backends/cpu/kernels/run_checks.h"
#include "backends/cpu/kernels/softmax_exp.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

/// The [outer, extent, inner] view the op normalizes over: before opset 13 the input is
/// flattened to 2-D at `axis` (default 1); from 13 the op works along `axis` (default -1).
struct SoftmaxAttrs {
  std::string opType;
  int64_t axis = -1;
  bool flattened =
      false;  // before opset 13: the input is viewed as 2-D [outer, the rest from axis]
};

SoftmaxAttrs softmaxAttrs(const ir::Node& node) {
  const bool flattened = node.opset < 13;
  return {node.opType, ir::attrInt(node, "axis", flattened ? 1 : -1), flattened};
}

AxisBlocks softmaxBlocks(const KernelContext& ctx, const SoftmaxAttrs& attrs, const Shape& shape) {
  const auto rank = static_cast<int64_t>(shape.size());
  if (!attrs.flattened)
    return axisBlocks(shape, static_cast<size_t>(normalizeAxis(ctx, attrs.axis, rank)));
  const int64_t axis = normalizeAxis(ctx, attrs.axis, rank);
  AxisBlocks b;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? b.outer : b.extent) *= shape[static_cast<size_t>(d)];
  return b;
}

// Pass helpers: scalar templates (used for double), with float overloads on 8-wide vectors.

template <typename C>
C rowMax(const C* x, int64_t n) {
  C m = x[0];
  for (int64_t j = 1; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

float rowMax(const float* x, int64_t n) {
  float m = x[0];
  int64_t j = 0;
  if (n >= 8) {
    Float8 v = load8(x);
    for (j = 8; j + 8 <= n; j += 8) v = max8(v, load8(x + j));
    m = horizontalMax(v);
  }
  for (; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

/// y = exp(x - shift); returns the sum of y.
template <typename C>
C expAndSum(const C* x, C* y, int64_t n, C shift) {
  C sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    y[j] = vectorExp(x[j] - shift);
    sum += y[j];
  }
  return sum;
}

float expAndSum(const float* x, float* y, int64_t n, float shift) {
  Float8 acc = splat(0.0f);
  const Float8 shift8 = splat(shift);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const Float8 e = vectorExp(load8(x + j) - shift8);
    store8(y + j, e);
    acc += e;
  }
  float sum = horizontalSum(acc);
  for (; j < n; ++j) {
    y[j] = vectorExp(x[j] - shift);
    sum += y[j];
  }
  return sum;
}

/// m = max(m, x) elementwise.
template <typename C>
void maxInto(const C* x, C* m, int64_t n) {
  for (int64_t i = 0; i < n; ++i) m[i] = x[i] > m[i] ? x[i] : m[i];
}

void maxInto(const float* x, float* m, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store8(m + i, max8(load8(m + i), load8(x + i)));
  for (; i < n; ++i) m[i] = x[i] > m[i] ? x[i] : m[i];
}

/// y = exp(x - shift) and sum += y, elementwise.
template <typename C>
void expAccumulate(const C* x, const C* shift, C* y, C* sum, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] = vectorExp(x[i] - shift[i]);
    sum[i] += y[i];
  }
}

void expAccumulate(const float* x, const float* shift, float* y, float* sum, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const Float8 e = vectorExp(load8(x + i) - load8(shift + i));
    store8(y + i, e);
    store8(sum + i, load8(sum + i) + e);
  }
  for (; i < n; ++i) {
    y[i] = vectorExp(x[i] - shift[i]);
    sum[i] += y[i];
  }
}

/// Softmax or LogSoftmax of x into y (distinct buffers) in compute type C.
template <typename C, bool kLog>
void softmaxCompute(const C* x, C* y, const AxisBlocks& b) {
  if (b.extent == 0) return;
  if (b.inner == 1) {
    for (int64_t o = 0; o < b.outer; ++o) {
      const C* xr = x + o * b.extent;
      C* yr = y + o * b.extent;
      const C max = rowMax(xr, b.extent);
      const C sum = expAndSum(xr, yr, b.extent, max);
      if constexpr (kLog) {
        const C shift = max + std::log(sum);
        for (int64_t j = 0; j < b.extent; ++j) yr[j] = xr[j] - shift;
      } else {
        const C inv = C(1) / sum;
        for (int64_t j = 0; j < b.extent; ++j) yr[j] *= inv;
      }
    }
    return;
  }
  // Along a middle axis: the same three passes, vectorized across the inner dimension.
  std::vector<C> max(static_cast<size_t>(b.inner)), sum(static_cast<size_t>(b.inner));
  for (int64_t o = 0; o < b.outer; ++o) {
    const C* xb = x + o * b.extent * b.inner;
    C* yb = y + o * b.extent * b.inner;
    std::copy(xb, xb + b.inner, max.begin());
    for (int64_t r = 1; r < b.extent; ++r) maxInto(xb + r * b.inner, max.data(), b.inner);
    std::fill(sum.begin(), sum.end(), C(0));
    for (int64_t r = 0; r < b.extent; ++r) {
      expAccumulate(xb + r * b.inner, max.data(), yb + r * b.inner, sum.data(), b.inner);
    }
    for (int64_t i = 0; i < b.inner; ++i) sum[i] = kLog ? max[i] + std::log(sum[i]) : C(1) / sum[i];
    for (int64_t r = 0; r < b.extent; ++r) {
      const C* row = xb + r * b.inner;
      C* out = yb + r * b.inner;
      for (int64_t i = 0; i < b.inner; ++i) out[i] = kLog ? row[i] - sum[i] : out[i] * sum[i];
    }
  }
}

template <bool kLog>
void softmaxKernel(KernelContext& ctx, const SoftmaxAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const AxisBlocks b = softmaxBlocks(ctx, attrs, x.shape());
  dispatchFloat(x.dtype(), attrs.opType.c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    if constexpr (std::is_same_v<T, float> && !kLog) {
      if (b.inner == 1 && b.extent > 0) {
        // Rows along the last axis: the vectorized row softmax (AVX-512 when available), rows
        // split over the thread pool when there are enough of them to pay for it.
        const float* px = x.data<float>();
        float* py = y.data<float>();
        auto rows = [&](int64_t begin, int64_t end) {
          std::copy(px + begin * b.extent, px + end * b.extent, py + begin * b.extent);
          softmaxRows(py + begin * b.extent, b.extent, nullptr, 0, end - begin, b.extent);
        };
        constexpr int64_t kParallelElements = 1 << 14;
        if (x.numel() >= kParallelElements) {
          parallelFor(b.outer, rows);
        } else {
          rows(0, b.outer);
        }
        return;
      }
    }
    if constexpr (std::is_same_v<T, C>) {
      softmaxCompute<C, kLog>(x.data<T>(), y.data<T>(), b);
    } else {  // 16-bit floats: compute in float
      const int64_t n = x.numel();
      std::vector<C> in(x.data<T>(), x.data<T>() + n), out(static_cast<size_t>(n));
      softmaxCompute<C, kLog>(in.data(), out.data(), b);
      T* py = y.data<T>();
      for (int64_t i = 0; i < n; ++i) py[i] = static_cast<T>(out[i]);
    }
  });
}

// Hardmax: 1 at the first maximum along the axis, 0 elsewhere.
void hardmaxKernel(KernelContext& ctx, const SoftmaxAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const AxisBlocks b = softmaxBlocks(ctx, attrs, x.shape());
  dispatchFloat(x.dtype(), "Hardmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    std::fill(py, py + x.numel(), T(0.0f));
    if (b.extent == 0) return;
    for (int64_t o = 0; o < b.outer; ++o) {
      const T* xb = px + o * b.extent * b.inner;
      T* yb = py + o * b.extent * b.inner;
      for (int64_t i = 0; i < b.inner; ++i) {
        int64_t best = 0;
        C bestValue = C(xb[i]);
        for (int64_t r = 1; r < b.extent; ++r) {
          const C v = C(xb[r * b.inner + i]);
          if (v > bestValue) {
            bestValue = v;
            best = r;
          }
        }
        yb[best * b.inner + i] = T(1.0f);
      }
    }
  });
}

KILN_REGISTER_CPU_KERNEL("Softmax", bindKernel(softmaxAttrs, softmaxKernel<false>));
KILN_REGISTER_CPU_KERNEL("LogSoftmax", bindKernel(softmaxAttrs, softmaxKernel<true>));
KILN_REGISTER_CPU_KERNEL("Hardmax", bindKernel(softmaxAttrs, hardmaxKernel));

}  // namespace
}  // namespace kiln::cpu
