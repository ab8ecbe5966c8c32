// CPU kernels of kiln::NchwcMaxPool and kiln::NchwcAveragePool (MaxPool / AveragePool over H and W)
// and of kiln::NchwcGlobalAveragePool / NchwcGlobalMaxPool, on blocked [N, Cb, H, W, 16] tensors
// (see ir/ops/nchwc.h). The 16 channels of a pixel are one vector, so every step works on 16
// lanes at once. For the windowed pools each task is one output row of one channel block, whose
// pixels read their windows straight from the input rows. The global pools sum in double like
// pool_global.cpp.
#include <immintrin.h>

#include <algorithm>
#include <limits>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels/pool_window.h"
#include "backends/cpu/kernels/reduce_simd.h"
#include "backends/cpu/thread_pool.h"
#include "ir/node_attrs.h"
#include "ir/ops/nchwc.h"

namespace kiln::cpu {
namespace detail {
/// averagePlane on AVX-512 (nchwc_pool_avx512.cpp), with the same result; only when the CPU has it.
void averageBlockedPlaneAvx512(const float* src, int64_t pixels, float* dst);
}  // namespace detail

namespace {

constexpr int64_t kLanes = ir::kNchwcBlock;

// The 16 channels of one pixel as two AVX2 vectors (a struct, not one 64-byte vector type, whose
// by-value passing GCC warns about in a build without AVX-512).
struct Lanes {
  Float8 lo, hi;
};

inline Lanes loadLanes(const float* p) { return {load8(p), load8(p + 8)}; }
inline void storeLanes(float* p, const Lanes& v) {
  store8(p, v.lo);
  store8(p + 8, v.hi);
}
inline Lanes splatLanes(float v) { return {splat(v), splat(v)}; }

struct MaxLanes {
  static Lanes init() { return splatLanes(std::numeric_limits<float>::lowest()); }
  static Lanes combine(const Lanes& acc, const Lanes& v) {
    return {v.lo > acc.lo ? v.lo : acc.lo, v.hi > acc.hi ? v.hi : acc.hi};
  }
  // A window with no tap inside the input gives 0, as in the plain kernel.
  Lanes finish(const Lanes& acc, int64_t count, int64_t) const {
    return count == 0 ? splatLanes(0.0f) : acc;
  }
};

struct AverageLanes {
  bool countPadding = false;
  static Lanes init() { return splatLanes(0.0f); }
  static Lanes combine(const Lanes& acc, const Lanes& v) { return {acc.lo + v.lo, acc.hi + v.hi}; }
  Lanes finish(const Lanes& acc, int64_t count, int64_t padded) const {
    const int64_t n = countPadding ? padded : count;
    if (n <= 0) return splatLanes(0.0f);
    const Float8 divisor = splat(static_cast<float>(n));
    return {acc.lo / divisor, acc.hi / divisor};
  }
};

// The blocked tensor seen as N * Cb planes of H x W pixels of 16 lanes.
Shape planeShape(const Tensor& x) { return {x.dim(0), x.dim(1), x.dim(2), x.dim(3)}; }

// Each task is one output row of one plane; each output pixel folds its window column by column,
// each column over the window's rows: the order in which the plain kernel (pool.cpp) merges the
// window's rows first and then folds the merged row's columns, so the sums match it exactly.
template <typename Op>
void blockedPool(const Tensor& x, Tensor& y, const PoolWindows& w, Op op) {
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t inW = w.in[2], inH = w.in[1];
  const int64_t outW = w.out[2], outH = w.out[1];
  const int64_t rowDilation = w.dilation[1], columnDilation = w.dilation[2];
  const int64_t rowsPerTask =
      std::max<int64_t>(1, kMinElementsPerThread / std::max<int64_t>(1, (inW + outW) * kLanes));
  const float* in = x.data<float>();
  float* outData = y.data<float>();
  parallelForAtLeast(planes * outH, rowsPerTask, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t plane = t / outH, oh = t % outH;
      const TapRange& r1 = w.taps[1][static_cast<size_t>(oh)];
      const int64_t rows = r1.last - r1.first;
      // The window's first input row; its others follow rowStep floats apart.
      const float* top = in + (plane * inH + r1.start + r1.first * rowDilation) * inW * kLanes;
      const int64_t rowStep = rowDilation * inW * kLanes;
      float* dst = outData + (plane * outH + oh) * outW * kLanes;
      for (int64_t ow = 0; ow < outW; ++ow) {
        const TapRange& r2 = w.taps[2][static_cast<size_t>(ow)];
        Lanes acc = Op::init();
        if (rows > 0) {
          for (int64_t c = r2.first; c < r2.last; ++c) {
            const float* p = top + (r2.start + c * columnDilation) * kLanes;
            Lanes column = Op::combine(Op::init(), loadLanes(p));
            for (int64_t b = 1; b < rows; ++b)
              column = Op::combine(column, loadLanes(p + b * rowStep));
            acc = Op::combine(acc, column);
          }
        }
        storeLanes(dst + ow * kLanes,
                   op.finish(acc, rows * (r2.last - r2.first), r1.paddedCount * r2.paddedCount));
      }
    }
  });
}

void checkBlockedInput(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DataType::kFloat32 || x.rank() != 5 || x.dim(4) != kLanes) {
    ctx.fail("X must be a blocked float32 tensor [N, C/16, H, W, 16], got " + x.describe());
  }
}

KernelFn makeNchwcMaxPool(const KernelCreateInfo& info) {
  const BoundPoolAttrs attrs = bindPoolAttrs(info.node, 2);
  return [attrs](KernelContext& ctx) {
    checkBlockedInput(ctx);
    const Tensor& x = ctx.input(0);
    const PoolWindows w = makePoolWindows(ctx, attrs, attrs.attrs, planeShape(x));
    blockedPool(x, ctx.output(0), w, MaxLanes{});
  };
}

KernelFn makeNchwcAveragePool(const KernelCreateInfo& info) {
  const BoundPoolAttrs attrs = bindPoolAttrs(info.node, 2);
  const bool countPadding = ir::attrInt(info.node, "count_include_pad", 0) != 0;
  return [attrs, countPadding](KernelContext& ctx) {
    checkBlockedInput(ctx);
    const Tensor& x = ctx.input(0);
    const PoolWindows w = makePoolWindows(ctx, attrs, attrs.attrs, planeShape(x));
    blockedPool(x, ctx.output(0), w, AverageLanes{countPadding});
  };
}

// Adds the 16 lanes of one pixel, widened to double, into four vectors of 4 doubles.
inline void addPixel(__m256d (&sum)[4], const float* p) {
  const __m256 lo = _mm256_loadu_ps(p), hi = _mm256_loadu_ps(p + 8);
  sum[0] = _mm256_add_pd(sum[0], _mm256_cvtps_pd(_mm256_castps256_ps128(lo)));
  sum[1] = _mm256_add_pd(sum[1], _mm256_cvtps_pd(_mm256_extractf128_ps(lo, 1)));
  sum[2] = _mm256_add_pd(sum[2], _mm256_cvtps_pd(_mm256_castps256_ps128(hi)));
  sum[3] = _mm256_add_pd(sum[3], _mm256_cvtps_pd(_mm256_extractf128_ps(hi, 1)));
}

// The mean of each lane over `pixels` pixels, summed in double like pool_global.cpp. Even and
// odd pixels go to separate sums so that two chains of dependent additions run at once.
void averagePlane(const float* src, int64_t pixels, float* dst) {
  __m256d even[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                     _mm256_setzero_pd()};
  __m256d odd[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                    _mm256_setzero_pd()};
  int64_t p = 0;
  for (; p + 2 <= pixels; p += 2) {
    addPixel(even, src + p * kLanes);
    addPixel(odd, src + (p + 1) * kLanes);
  }
  if (p < pixels) addPixel(even, src + p * kLanes);
  const __m256d count = _mm256_set1_pd(static_cast<double>(pixels));
  for (int k = 0; k < 4; ++k) {
    _mm_storeu_ps(dst + 4 * k,
                  _mm256_cvtpd_ps(_mm256_div_pd(_mm256_add_pd(even[k], odd[k]), count)));
  }
}

void maxPlane(const float* src, int64_t pixels, float* dst) {
  Lanes acc = MaxLanes::init();
  for (int64_t p = 0; p < pixels; ++p) acc = MaxLanes::combine(acc, loadLanes(src + p * kLanes));
  storeLanes(dst, acc);
}

// Mean or max of each lane over the H x W pixels of each (image, channel block).
void blockedGlobalPool(const Tensor& x, Tensor& y, bool isMax) {
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t pixels = x.dim(2) * x.dim(3);
  const bool avx512 = activeCpuIsa() >= CpuIsa::kAvx512;
  parallelForAtLeast(
      planes, std::max<int64_t>(1, kMinElementsPerThread / std::max<int64_t>(1, pixels * kLanes)),
      [&](int64_t p0, int64_t p1) {
        for (int64_t plane = p0; plane < p1; ++plane) {
          const float* src = x.data<float>() + plane * pixels * kLanes;
          float* dst = y.data<float>() + plane * kLanes;
          if (isMax)
            maxPlane(src, pixels, dst);
          else if (avx512)
            detail::averageBlockedPlaneAvx512(src, pixels, dst);
          else
            averagePlane(src, pixels, dst);
        }
      });
}

KernelFn globalPoolKernel(bool isMax) {
  return [isMax](KernelContext& ctx) {
    checkBlockedInput(ctx);
    blockedGlobalPool(ctx.input(0), ctx.output(0), isMax);
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("kiln", "NchwcGlobalAveragePool", globalPoolKernel(false));
KILN_REGISTER_CPU_KERNEL_DOMAIN("kiln", "NchwcGlobalMaxPool", globalPoolKernel(true));
KILN_REGISTER_CPU_KERNEL_DOMAIN("kiln", "NchwcMaxPool", KernelFactory(makeNchwcMaxPool));
KILN_REGISTER_CPU_KERNEL_DOMAIN("kiln", "NchwcAveragePool", KernelFactory(makeNchwcAveragePool));

}  // namespace kiln::cpu
