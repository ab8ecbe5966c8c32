// CPU kernels of kiln::NchwcMaxPool and kiln::NchwcAveragePool (MaxPool / AveragePool over H and W)
// and of kiln::NchwcGlobalAveragePool / NchwcGlobalMaxPool, on blocked [N, Cb, H, W, 16] tensors
// (see ir/ops/nchwc.h). The 16 channels of a pixel are one vector, so every step works on 16
// lanes at once. For the windowed pools each task is one output row of one channel block: the
// window's input rows are first combined into one merged row, then each output pixel combines its
// columns of that row, in the same order as the plain kernel (pool.cpp), so results match it
// exactly. The global pools sum in double like pool_global.cpp.
#include <immintrin.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "backends/cpu/kernels/pool_window.h"
#include "backends/cpu/thread_pool.h"
#include "ir/node_attrs.h"
#include "ir/ops/nchwc.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kLanes = ir::kNchwcBlock;

// combine(acc, v, n) folds n contiguous floats of v into acc (a run of whole pixels).
struct MaxLanes {
  static float init() { return std::numeric_limits<float>::lowest(); }
  static void combine(float* __restrict acc, const float* __restrict v, int64_t n) {
    for (int64_t i = 0; i < n; ++i) acc[i] = v[i] > acc[i] ? v[i] : acc[i];
  }
  // A window with no tap inside the input gives 0, as in the plain kernel.
  void finish(float* acc, int64_t count, int64_t) const {
    if (count == 0) std::fill(acc, acc + kLanes, 0.0f);
  }
};

struct AverageLanes {
  bool countPadding = false;
  static float init() { return 0.0f; }
  static void combine(float* __restrict acc, const float* __restrict v, int64_t n) {
    for (int64_t i = 0; i < n; ++i) acc[i] += v[i];
  }
  void finish(float* acc, int64_t count, int64_t padded) const {
    const int64_t n = countPadding ? padded : count;
    for (int64_t c = 0; c < kLanes; ++c) acc[c] = n > 0 ? acc[c] / static_cast<float>(n) : 0.0f;
  }
};

// The blocked tensor seen as N * Cb planes of H x W pixels of 16 lanes.
Shape planeShape(const Tensor& x) { return {x.dim(0), x.dim(1), x.dim(2), x.dim(3)}; }

template <typename Op>
void blockedPool(const Tensor& x, Tensor& y, const PoolWindows& w, Op op) {
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t inW = w.in[2], inH = w.in[1];
  const int64_t outW = w.out[2], outH = w.out[1];
  const int64_t rowDilation = w.dilation[1];
  const int64_t s2 = w.lastStride;
  const int64_t rowsPerTask = std::max<int64_t>(1, kMinElementsPerThread / std::max<int64_t>(1, (inW + outW) * kLanes));
  parallelForAtLeast(planes * outH, rowsPerTask, [&](int64_t t0, int64_t t1) {
    std::vector<float> merged(static_cast<size_t>(inW * kLanes));
    std::vector<float> acc(static_cast<size_t>(outW * kLanes));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t plane = t / outH, oh = t % outH;
      const float* src = x.data<float>() + plane * inH * inW * kLanes;
      float* dst = y.data<float>() + (plane * outH + oh) * outW * kLanes;
      const TapRange& r1 = w.taps[1][static_cast<size_t>(oh)];
      std::fill(merged.begin(), merged.end(), Op::init());
      for (int64_t b = r1.first; b < r1.last; ++b) {
        const float* row = src + (r1.start + b * rowDilation) * inW * kLanes;
        Op::combine(merged.data(), row, inW * kLanes);
      }
      std::fill(acc.begin(), acc.end(), Op::init());
      if (r1.last > r1.first) {
        for (const ColumnTap& tap : w.columnTaps) {
          const float* in = merged.data() + (tap.lo * s2 + tap.offset) * kLanes;
          float* out = acc.data() + tap.lo * kLanes;
          if (s2 == 1) {
            Op::combine(out, in, (tap.hi - tap.lo) * kLanes);
          } else {
            for (int64_t j = 0; j < tap.hi - tap.lo; ++j) Op::combine(out + j * kLanes, in + j * s2 * kLanes, kLanes);
          }
        }
      }
      const int64_t rows = r1.last - r1.first;
      for (int64_t ow = 0; ow < outW; ++ow) {
        const TapRange& r2 = w.taps[2][static_cast<size_t>(ow)];
        float* out = acc.data() + ow * kLanes;
        op.finish(out, rows * (r2.last - r2.first), r1.paddedCount * r2.paddedCount);
        std::copy(out, out + kLanes, dst + ow * kLanes);
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
  const ir::PoolAttrs attrs = ir::readPoolAttrs(info.node, 2);
  return [attrs](KernelContext& ctx) {
    checkBlockedInput(ctx);
    const Tensor& x = ctx.input(0);
    const PoolWindows w = makePoolWindows(ctx, attrs, planeShape(x));
    blockedPool(x, ctx.output(0), w, MaxLanes{});
  };
}

KernelFn makeNchwcAveragePool(const KernelCreateInfo& info) {
  const ir::PoolAttrs attrs = ir::readPoolAttrs(info.node, 2);
  const bool countPadding = ir::attrInt(info.node, "count_include_pad", 0) != 0;
  return [attrs, countPadding](KernelContext& ctx) {
    checkBlockedInput(ctx);
    const Tensor& x = ctx.input(0);
    const PoolWindows w = makePoolWindows(ctx, attrs, planeShape(x));
    blockedPool(x, ctx.output(0), w, AverageLanes{countPadding});
  };
}

// Mean (in double) or max of each lane over the H x W pixels of each (image, channel block).
void blockedGlobalPool(const Tensor& x, Tensor& y, bool isMax) {
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t pixels = x.dim(2) * x.dim(3);
  parallelForAtLeast(planes, std::max<int64_t>(1, kMinElementsPerThread / std::max<int64_t>(1, pixels * kLanes)),
                     [&](int64_t p0, int64_t p1) {
    for (int64_t plane = p0; plane < p1; ++plane) {
      const float* src = x.data<float>() + plane * pixels * kLanes;
      float* dst = y.data<float>() + plane * kLanes;
      if (isMax) {
        float acc[kLanes];
        std::fill(acc, acc + kLanes, MaxLanes::init());
        for (int64_t p = 0; p < pixels; ++p) MaxLanes::combine(acc, src + p * kLanes, kLanes);
        std::copy(acc, acc + kLanes, dst);
      } else {
        // Four vectors of 4 doubles hold the 16 lanes' sums.
        __m256d sum[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
        for (int64_t p = 0; p < pixels; ++p) {
          const __m256 lo = _mm256_loadu_ps(src + p * kLanes), hi = _mm256_loadu_ps(src + p * kLanes + 8);
          sum[0] = _mm256_add_pd(sum[0], _mm256_cvtps_pd(_mm256_castps256_ps128(lo)));
          sum[1] = _mm256_add_pd(sum[1], _mm256_cvtps_pd(_mm256_extractf128_ps(lo, 1)));
          sum[2] = _mm256_add_pd(sum[2], _mm256_cvtps_pd(_mm256_castps256_ps128(hi)));
          sum[3] = _mm256_add_pd(sum[3], _mm256_cvtps_pd(_mm256_extractf128_ps(hi, 1)));
        }
        alignas(32) double acc[kLanes];
        for (int k = 0; k < 4; ++k) _mm256_store_pd(acc + 4 * k, sum[k]);
        for (int64_t c = 0; c < kLanes; ++c) dst[c] = static_cast<float>(acc[c] / static_cast<double>(pixels));
      }
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
