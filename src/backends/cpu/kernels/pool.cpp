// CPU kernels for windowed pooling: MaxPool (with its Indices output), AveragePool and LpPool.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/pool_max_bytes.h"
#include "backends/cpu/kernels/pool_window.h"

namespace kiln::cpu {
namespace {

using ir::PoolAttrs;

// Attributes read at build time when the rank is known, else on each run.
BoundPoolAttrs readAttrs(const KernelCreateInfo& info) {
  const ir::TypeInfo* x = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  std::optional<size_t> spatialRank;
  if (x && x->shape && x->shape->size() >= 3) spatialRank = x->shape->size() - 2;
  return bindPoolAttrs(info.node, spatialRank);
}

// Planes per thread worth a dispatch: each plane reads about inPlane elements.
int64_t planesPerThread(const PoolWindows& w) {
  return std::max<int64_t>(
      1, kMinElementsPerThread / std::max<int64_t>(1, w.inPlane() + w.outPlane()));
}

// Row-at-a-time pooling: for each output row, the input rows of its valid (dim 0, dim 1) taps are
// first combined elementwise into one row (contiguous, vectorizes), then every kernel column takes
// its strided slice of that row into an accumulator row, so each input row is streamed once.
// Op supplies init(), load(x) (value transform), combine(acc, v) and finish(acc, count,
// paddedCount) where the counts are the window's taps inside the input / inside the input and its
// padding.
template <typename T, typename Op>
void rowPool(const Tensor& x, Tensor& y, const PoolWindows& w, Op op) {
  using C = ComputeType<T>;
  const int64_t planes = x.dim(0) * x.dim(1);
  // Named copies, not structured bindings: clang 14 (the fuzz build) cannot capture bindings.
  const int64_t d0 = w.dilation[0], d1 = w.dilation[1];
  const int64_t n1 = w.in[1], n2 = w.in[2];
  const int64_t out2 = w.out[2];
  const int64_t s2 = w.lastStride;
  // Planes are independent: each thread pools a contiguous block of them.
  parallelForAtLeast(planes, planesPerThread(w), [&](int64_t pBegin, int64_t pEnd) {
    std::vector<C> acc(static_cast<size_t>(out2));
    std::vector<C> rows(static_cast<size_t>(n2));
    C* merged = rows.data();
    for (int64_t p = pBegin; p < pEnd; ++p) {
      const T* src = x.data<T>() + p * w.inPlane();
      T* dst = y.data<T>() + p * w.outPlane();
      for (const TapRange& r0 : w.taps[0]) {
        for (const TapRange& r1 : w.taps[1]) {
          // merged[i] = combine over the window's rows of load(x[row][i]), starting from init()
          // so that the result equals combining every tap one at a time.
          std::fill(rows.begin(), rows.end(), op.init());
          for (int64_t a = r0.first; a < r0.last; ++a) {
            for (int64_t b = r1.first; b < r1.last; ++b) {
              const T* row = src + ((r0.start + a * d0) * n1 + r1.start + b * d1) * n2;
              for (int64_t i = 0; i < n2; ++i)
                merged[i] = op.combine(merged[i], op.load(C(row[i])));
            }
          }
          std::fill(acc.begin(), acc.end(), op.init());
          if (r0.last > r0.first && r1.last > r1.first) {
            for (const ColumnTap& t : w.columnTaps) {
              const C* in = merged + t.lo * s2 + t.offset;
              C* out = acc.data() + t.lo;
              const int64_t n = t.hi - t.lo;
              if (s2 == 1) {
                for (int64_t j = 0; j < n; ++j) out[j] = op.combine(out[j], in[j]);
              } else {
                for (int64_t j = 0; j < n; ++j) out[j] = op.combine(out[j], in[j * s2]);
              }
            }
          }
          const int64_t count01 = (r0.last - r0.first) * (r1.last - r1.first);
          const int64_t padded01 = r0.paddedCount * r1.paddedCount;
          for (int64_t o2 = 0; o2 < out2; ++o2) {
            const TapRange& r2 = w.taps[2][static_cast<size_t>(o2)];
            dst[o2] = static_cast<T>(
                op.finish(acc[o2], count01 * (r2.last - r2.first), padded01 * r2.paddedCount));
          }
          dst += out2;
        }
      }
    }
  });
}

template <typename C>
struct MaxOp {
  C init() const { return std::numeric_limits<C>::lowest(); }
  C load(C v) const { return v; }
  C combine(C a, C v) const { return v > a ? v : a; }
  C finish(C a, int64_t count, int64_t) const {
    return count > 0 ? a : C(0);
  }  // all-padding window: 0
};

template <typename C>
struct AverageOp {
  bool countPadding;
  C init() const { return C(0); }
  C load(C v) const { return v; }
  C combine(C a, C v) const { return a + v; }
  C finish(C a, int64_t count, int64_t padded) const {
    const int64_t n = countPadding ? padded : count;
    return n > 0 ? a / static_cast<C>(n) : C(0);
  }
};

// LpPool: (sum of |x|^p)^(1/p), with p = 1 and 2 special-cased.
template <typename C>
struct LpOp {
  C p;
  C init() const { return C(0); }
  C load(C v) const {
    return p == C(2) ? v * v : (p == C(1) ? std::abs(v) : std::pow(std::abs(v), p));
  }
  C combine(C a, C v) const { return a + v; }
  C finish(C a, int64_t, int64_t) const {
    return p == C(2) ? std::sqrt(a) : (p == C(1) ? a : std::pow(a, C(1) / p));
  }
};

// MaxPool of uint8 / int8 on AVX-512 (pool_max_bytes.h), bit for bit as rowPool with MaxOp;
// false (nothing written) where it does not apply: no AVX-512, or a column window with no tap
// inside the input, whose 0 the padded row buffer would not give.
template <typename T>
bool maxPoolBytes(const Tensor& x, Tensor& y, const PoolWindows& w) {
  if constexpr (!std::is_same_v<T, uint8_t> && !std::is_same_v<T, int8_t>) {
    return false;
  } else {
    if (!cpuSupports(CpuIsa::kAvx512) || y.numel() == 0) return false;
    for (const TapRange& r2 : w.taps[2]) {
      if (r2.last <= r2.first) return false;
    }
    // The input rows of each output row's window, as rowPool visits them.
    std::vector<int64_t> rowBegin{0}, rowList;
    for (const TapRange& r0 : w.taps[0]) {
      for (const TapRange& r1 : w.taps[1]) {
        for (int64_t a = r0.first; a < r0.last; ++a) {
          for (int64_t b = r1.first; b < r1.last; ++b)
            rowList.push_back((r0.start + a * w.dilation[0]) * w.in[1] + r1.start +
                              b * w.dilation[1]);
        }
        rowBegin.push_back(static_cast<int64_t>(rowList.size()));
      }
    }
    BytePoolRows g;
    g.rowBegin = rowBegin.data();
    g.rowList = rowList.data();
    g.outRows = w.out[0] * w.out[1];
    g.in2 = w.in[2];
    g.out2 = w.out[2];
    g.inPlane = w.inPlane();
    g.outPlane = w.outPlane();
    g.padBegin = -w.taps[2][0].start;
    g.kernel = static_cast<int64_t>(w.columnTaps.size());
    g.dilation = w.dilation[2];
    g.stride = w.lastStride;
    g.isSigned = std::is_same_v<T, int8_t>;
    const auto* src = reinterpret_cast<const uint8_t*>(x.data<T>());
    auto* dst = reinterpret_cast<uint8_t*>(y.data<T>());
    parallelForAtLeast(x.dim(0) * x.dim(1), planesPerThread(w), [&](int64_t pBegin, int64_t pEnd) {
      std::vector<uint8_t> buffer(static_cast<size_t>(g.bufferLength()));
      maxPoolBytesAvx512(g, src, dst, pBegin, pEnd, buffer.data());
    });
    return true;
  }
}

// MaxPool with the Indices output: flat input index of each maximum (first one on ties), in
// row-major or (storage_order=1) column-major spatial order.
template <typename T>
void maxPoolWithIndices(const Tensor& x, Tensor& y, Tensor& indices, bool columnMajor,
                        const PoolWindows& w) {
  using C = ComputeType<T>;
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t inPlane = w.inPlane();
  const int64_t outPlane = w.outPlane();
  // Named copies, not structured bindings: clang 14 (the fuzz build) cannot capture bindings.
  const int64_t d0 = w.dilation[0], d1 = w.dilation[1], d2 = w.dilation[2];
  const int64_t n0 = w.in[0], n1 = w.in[1], n2 = w.in[2];
  parallelForAtLeast(planes, planesPerThread(w), [&](int64_t pBegin, int64_t pEnd) {
    for (int64_t p = pBegin; p < pEnd; ++p) {
      const T* src = x.data<T>() + p * inPlane;
      T* dst = y.data<T>() + p * outPlane;
      int64_t* idx = indices.data<int64_t>() + p * outPlane;
      int64_t o = 0;
      for (const TapRange& r0 : w.taps[0]) {
        for (const TapRange& r1 : w.taps[1]) {
          for (const TapRange& r2 : w.taps[2]) {
            C best = C(0);
            int64_t at = -1;  // stays -1 for a window entirely in padding
            for (int64_t a = r0.first; a < r0.last; ++a) {
              const int64_t i0 = r0.start + a * d0;
              for (int64_t b = r1.first; b < r1.last; ++b) {
                const int64_t i1 = r1.start + b * d1;
                for (int64_t c = r2.first; c < r2.last; ++c) {
                  const int64_t i2 = r2.start + c * d2;
                  const C v = C(src[(i0 * n1 + i1) * n2 + i2]);
                  if (at < 0 || v > best) {
                    best = v;
                    at = columnMajor ? i0 + (i1 + i2 * n1) * n0 : (i0 * n1 + i1) * n2 + i2;
                  }
                }
              }
            }
            dst[o] = static_cast<T>(best);
            idx[o] = at < 0 ? -1 : p * inPlane + at;
            ++o;
          }
        }
      }
    }
  });
}

KernelFn makeMaxPool(const KernelCreateInfo& info) {
  BoundPoolAttrs built = readAttrs(info);
  const bool columnMajor = ir::attrInt(info.node, "storage_order", 0) == 1;
  return [built, columnMajor](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    PoolWindows w = makePoolWindows(ctx, built, poolAttrsFor(ctx, built), x.shape());
    Tensor& y = ctx.output(0);
    dispatchNumeric(x.dtype(), "MaxPool", [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (ctx.wantsOutput(1)) {
        maxPoolWithIndices<T>(x, y, ctx.output(1), columnMajor, w);
      } else if (!maxPoolBytes<T>(x, y, w)) {
        rowPool<T>(x, y, w, MaxOp<ComputeType<T>>{});
      }
    });
  };
}

KernelFn makeAveragePool(const KernelCreateInfo& info) {
  BoundPoolAttrs built = readAttrs(info);
  const bool countPadding = ir::attrInt(info.node, "count_include_pad", 0) != 0;
  return [built, countPadding](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    PoolWindows w = makePoolWindows(ctx, built, poolAttrsFor(ctx, built), x.shape());
    Tensor& y = ctx.output(0);
    dispatchFloat(x.dtype(), "AveragePool", [&](auto tag) {
      using T = typename decltype(tag)::type;
      rowPool<T>(x, y, w, AverageOp<ComputeType<T>>{countPadding});
    });
  };
}

KernelFn makeLpPool(const KernelCreateInfo& info) {
  BoundPoolAttrs built = readAttrs(info);
  const double power = readLpPower(info.node);
  return [built, power](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    PoolWindows w = makePoolWindows(ctx, built, poolAttrsFor(ctx, built), x.shape());
    Tensor& y = ctx.output(0);
    dispatchFloat(x.dtype(), "LpPool", [&](auto tag) {
      using T = typename decltype(tag)::type;
      rowPool<T>(x, y, w, LpOp<ComputeType<T>>{static_cast<ComputeType<T>>(power)});
    });
  };
}

KILN_REGISTER_CPU_KERNEL("MaxPool", KernelFactory(makeMaxPool));
KILN_REGISTER_CPU_KERNEL("AveragePool", KernelFactory(makeAveragePool));
KILN_REGISTER_CPU_KERNEL("LpPool", KernelFactory(makeLpPool));

}  // namespace

int64_t BytePoolRows::bufferLength() const {
  const int64_t span = (out2 - 1) * stride + (kernel - 1) * dilation + 1;
  return std::max(padBegin + in2, span) + 64;
}

}  // namespace kiln::cpu
