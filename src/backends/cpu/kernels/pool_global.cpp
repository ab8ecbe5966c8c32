// CPU kernels for global pooling: each N x C plane reduces to one value.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/pool_window.h"

namespace kiln::cpu {
namespace {

enum class GlobalKind { kAverage, kMax, kLp };

// Sum of a float plane in double (planes can be large), widening 8 floats at a time.
double sumFloatPlane(const float* src, int64_t size) {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= size; i += 8) {
    const __m256 v = _mm256_loadu_ps(src + i);
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(lo, hi));
  double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < size; ++i) sum += src[i];
  return sum;
}

template <typename T>
void globalPool(const Tensor& x, Tensor& y, GlobalKind kind, double power) {
  using C = ComputeType<T>;
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t size = planes == 0 ? 0 : x.numel() / planes;
  const int64_t planesPerThread =
      std::max<int64_t>(1, kMinElementsPerThread / std::max<int64_t>(1, size));
  parallelForAtLeast(planes, planesPerThread, [&](int64_t pBegin, int64_t pEnd) {
    for (int64_t plane = pBegin; plane < pEnd; ++plane) {
      const T* src = x.data<T>() + plane * size;
      C result = 0;
      if (kind == GlobalKind::kMax) {
        result = std::numeric_limits<C>::lowest();
        for (int64_t i = 0; i < size; ++i) result = C(src[i]) > result ? C(src[i]) : result;
      } else if (kind == GlobalKind::kAverage) {
        double sum = 0;  // double: planes can be large
        if constexpr (std::is_same_v<T, float>) {
          sum = sumFloatPlane(src, size);
        } else {
          for (int64_t i = 0; i < size; ++i) sum += static_cast<double>(C(src[i]));
        }
        result = static_cast<C>(sum / static_cast<double>(size));
      } else {
        double sum = 0;
        for (int64_t i = 0; i < size; ++i)
          sum += std::pow(std::abs(static_cast<double>(C(src[i]))), power);
        result = static_cast<C>(std::pow(sum, 1.0 / power));
      }
      y.data<T>()[plane] = static_cast<T>(result);
    }
  });
}

KernelFactory globalKernel(GlobalKind kind) {
  return [kind](const KernelCreateInfo& info) -> KernelFn {
    const double power = kind == GlobalKind::kLp ? readLpPower(info.node) : 1.0;
    return [kind, power, opType = info.node.opType](KernelContext& ctx) {
      const Tensor& x = ctx.input(0);
      if (x.rank() < 3) ctx.fail("expects an input of rank >= 3");
      Tensor& y = ctx.output(0);
      dispatchFloat(x.dtype(), opType.c_str(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        globalPool<T>(x, y, kind, power);
      });
    };
  };
}

KILN_REGISTER_CPU_KERNEL("GlobalAveragePool", globalKernel(GlobalKind::kAverage));
KILN_REGISTER_CPU_KERNEL("GlobalMaxPool", globalKernel(GlobalKind::kMax));
KILN_REGISTER_CPU_KERNEL("GlobalLpPool", globalKernel(GlobalKind::kLp));

}  // namespace
}  // namespace kiln::cpu
