// CPU kernels for Resize (opset 10+) and Upsample (opsets 7-9).
// Resizing is separable: the tensor is resized one axis at a time, and for each axis the source
// indices and weights of every output position are computed once per call (resize_plan.h).
// Nearest mode copies elements exactly; linear and cubic accumulate in float (double for
// double and the 32/64-bit integers).
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/resize_plan.h"
#include "backends/cpu/kernels/run_checks.h"
#include "backends/cpu/thread_pool.h"
#include "core/dtype_dispatch.h"
#include "ir/shape_helpers.h"

namespace kiln::cpu {
namespace {

using namespace resize;

/// Geometry of one pass: the tensor viewed as [outer, inLen, inner], resized to [outer, outLen,
/// inner].
struct Pass {
  int64_t outer, inLen, outLen, inner;
};

// Rows per thread worth a dispatch when each output row of `inner` elements costs `taps` reads.
int64_t rowsPerThread(int64_t inner, int64_t taps) {
  return std::max<int64_t>(1, kMinElementsPerThread / std::max<int64_t>(1, inner * taps));
}

template <typename T>
void nearestPass(const T* src, T* dst, const Pass& g, const AxisPlan& plan, T extrapolation) {
  // Output rows (o, y) are independent: threads take contiguous ranges of them.
  if (g.inner == 1 && plan.extrapolate.empty()) {  // the last axis: gather element by element
    parallelForAtLeast(g.outer, rowsPerThread(g.outLen, 1), [&](int64_t o0, int64_t o1) {
      const int64_t* index = plan.index.data();
      for (int64_t o = o0; o < o1; ++o) {
        const T* row = src + o * g.inLen;
        T* d = dst + o * g.outLen;
        for (int64_t y = 0; y < g.outLen; ++y) d[y] = row[index[y]];
      }
    });
    return;
  }
  parallelForAtLeast(g.outer * g.outLen, rowsPerThread(g.inner, 1), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / g.outLen, y = r % g.outLen;
      T* d = dst + r * g.inner;
      if (!plan.extrapolate.empty() && plan.extrapolate[static_cast<size_t>(y)]) {
        std::fill(d, d + g.inner, extrapolation);
      } else {
        const T* row = src + (o * g.inLen + plan.index[static_cast<size_t>(y)]) * g.inner;
        std::copy(row, row + g.inner, d);
      }
    }
  });
}

/// One row of a last-axis pass: each output is a short dot product of gathered inputs.
/// kTaps > 0 fixes the tap count at compile time (linear 2, cubic 4) so the loop unrolls.
template <int64_t kTaps, typename Acc>
void gatherRow(const Acc* s, Acc* d, int64_t outLen, int64_t taps, const int64_t* index,
               const Acc* w) {
  const int64_t n = kTaps > 0 ? kTaps : taps;
  for (int64_t y = 0; y < outLen; ++y, index += n, w += n) {
    Acc acc = 0;
    for (int64_t k = 0; k < n; ++k) acc += w[k] * s[index[k]];
    d[y] = acc;
  }
}

template <typename Acc>
void interpolatePass(const Acc* src, Acc* dst, const Pass& g, const AxisPlan& plan,
                     Acc extrapolation) {
  std::vector<Acc> weights(plan.weight.begin(), plan.weight.end());
  const int64_t taps = plan.taps;
  auto extrapolated = [&](int64_t y) {
    return static_cast<size_t>(y) < plan.extrapolate.size() &&
           plan.extrapolate[static_cast<size_t>(y)];
  };
  if (g.inner == 1) {  // resizing the last axis: threads take contiguous ranges of rows
    auto row = taps == 2 ? gatherRow<2, Acc> : taps == 4 ? gatherRow<4, Acc> : gatherRow<0, Acc>;
    parallelForAtLeast(g.outer, rowsPerThread(g.outLen, taps), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        Acc* d = dst + o * g.outLen;
        row(src + o * g.inLen, d, g.outLen, taps, plan.index.data(), weights.data());
        for (int64_t y = 0; y < g.outLen; ++y) {
          if (extrapolated(y)) d[y] = extrapolation;
        }
      }
    });
    return;
  }
  // Output rows (o, y) of `inner` elements each are independent: threads take ranges of them.
  parallelForAtLeast(g.outer * g.outLen, rowsPerThread(g.inner, taps), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / g.outLen, y = r % g.outLen;
      Acc* out = dst + r * g.inner;
      if (extrapolated(y)) {
        std::fill(out, out + g.inner, extrapolation);
        continue;
      }
      const Acc* s = src + o * g.inLen * g.inner;
      const int64_t* index = &plan.index[static_cast<size_t>(y * taps)];
      const Acc* w = &weights[static_cast<size_t>(y * taps)];
      const Acc* row0 = s + index[0] * g.inner;
      for (int64_t j = 0; j < g.inner; ++j) out[j] = w[0] * row0[j];
      for (int64_t k = 1; k < taps; ++k) {
        const Acc* row = s + index[k] * g.inner;
        const Acc wk = w[k];
        for (int64_t j = 0; j < g.inner; ++j) out[j] += wk * row[j];
      }
    }
  });
}

/// The order of the axis passes that reads and writes the fewest elements: each pass costs its
/// output's size times its taps, and the last axis's pass (which gathers element by element,
/// where the others stream whole rows) counts kGatherCost times that. Upsampling a feature map
/// by 16 in both axes then resizes its rows before it multiplies them.
std::vector<size_t> cheapestPassOrder(std::vector<size_t> active, const Shape& shape,
                                      const std::vector<AxisParams>& params, int64_t taps) {
  constexpr double kGatherCost = 4.0;
  auto cost = [&](const std::vector<size_t>& order) {
    Shape current = shape;
    double total = 0;
    for (size_t axis : order) {
      current[axis] = params[axis].outLen;
      double elements = 1;
      for (int64_t d : current) elements *= static_cast<double>(d);
      total += elements * static_cast<double>(taps) * (axis + 1 == shape.size() ? kGatherCost : 1);
    }
    return total;
  };
  std::sort(active.begin(), active.end());
  std::vector<size_t> best = active;
  double bestCost = cost(active);
  while (active.size() <= 4 && std::next_permutation(active.begin(), active.end())) {
    const double c = cost(active);
    if (c < bestCost) bestCost = c, best = active;
  }
  return best;
}

/// Resizes src (shape `shape`) through every non-identity axis; passFn(src, dst, pass, plan) does
/// one axis. Writes the last pass into `out`; returns false if no axis needed resizing.
template <typename V, typename PassFn>
bool resizeAxes(const V* src, V* out, Shape shape, const std::vector<AxisParams>& params,
                const ResizeAttrs& attrs, PassFn passFn) {
  std::vector<size_t> active;
  for (size_t a = 0; a < params.size(); ++a) {
    if (!params[a].isIdentity()) active.push_back(a);
  }
  if (active.empty()) return false;
  const int64_t taps = attrs.mode == Mode::kNearest ? 1 : attrs.mode == Mode::kLinear ? 2 : 4;
  active = cheapestPassOrder(std::move(active), shape, params, taps);
  std::vector<V> buffers[2];
  const V* current = src;
  for (size_t step = 0; step < active.size(); ++step) {
    size_t axis = active[step];
    Pass g{1, shape[axis], params[axis].outLen, 1};
    for (size_t i = 0; i < axis; ++i) g.outer *= shape[i];
    for (size_t i = axis + 1; i < shape.size(); ++i) g.inner *= shape[i];
    V* dst = out;
    if (step + 1 < active.size()) {
      buffers[step % 2].resize(static_cast<size_t>(g.outer * g.outLen * g.inner));
      dst = buffers[step % 2].data();
    }
    passFn(current, dst, g, planAxis(attrs, params[axis]));
    shape[axis] = params[axis].outLen;
    current = dst;
  }
  return true;
}

template <typename T>
using AccumulatorType =
    std::conditional_t<std::is_same_v<T, double> || std::is_same_v<T, int32_t> ||
                           std::is_same_v<T, int64_t> || std::is_same_v<T, uint32_t> ||
                           std::is_same_v<T, uint64_t>,
                       double, float>;

/// Converts an accumulated value back to T; integers round half to even and saturate.
template <typename T, typename Acc>
T fromAccumulator(Acc v) {
  if constexpr (std::is_integral_v<T>) {
    double r = std::nearbyint(static_cast<double>(v));
    if (!(r >= static_cast<double>(std::numeric_limits<T>::lowest())))
      return std::numeric_limits<T>::lowest();
    if (r >= static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return static_cast<T>(r);
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
void resizeTyped(const Tensor& x, Tensor& y, const std::vector<AxisParams>& params,
                 const ResizeAttrs& attrs) {
  const T* src = x.data<T>();
  T* out = y.data<T>();
  bool resized = false;
  if (attrs.mode == Mode::kNearest) {
    T extrapolation = fromAccumulator<T>(attrs.extrapolation);
    resized = resizeAxes<T>(src, out, x.shape(), params, attrs,
                            [&](const T* s, T* d, const Pass& g, const AxisPlan& p) {
                              nearestPass(s, d, g, p, extrapolation);
                            });
  } else {
    using Acc = AccumulatorType<T>;
    auto pass = [&](const Acc* s, Acc* d, const Pass& g, const AxisPlan& p) {
      interpolatePass(s, d, g, p, static_cast<Acc>(attrs.extrapolation));
    };
    if constexpr (std::is_same_v<T, Acc>) {
      resized = resizeAxes<Acc>(src, out, x.shape(), params, attrs, pass);
    } else {
      std::vector<Acc> in(static_cast<size_t>(x.numel()));
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<Acc>(src[i]);
      std::vector<Acc> result(static_cast<size_t>(y.numel()));
      resized = resizeAxes<Acc>(in.data(), result.data(), x.shape(), params, attrs, pass);
      if (resized) {
        for (size_t i = 0; i < result.size(); ++i) out[i] = fromAccumulator<T>(result[i]);
      }
    }
  }
  if (!resized) std::copy(src, src + x.numel(), out);
}

std::vector<double> readDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.doubleAt(static_cast<int64_t>(i));
  return v;
}

/// Scale, roi and sizes of every axis for this call; the output sizes come from shape inference.
std::vector<AxisParams> axisParams(KernelContext& ctx, const ResizeAttrs& attrs, const Shape& in,
                                   const Shape& out) {
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> axes;
  if (attrs.hasAxesAttr) {
    for (int64_t a : attrs.axesAttr) axes.push_back(normalizeAxis(ctx, a, rank));
  } else {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  std::vector<AxisParams> params(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    params[i].inLen = in[i];
    params[i].outLen = out[i];
    if (in[i] == 0 && out[i] > 0)
      ctx.fail("cannot resize an empty axis " + std::to_string(i) + " to " +
               std::to_string(out[i]));
  }
  bool useSizes = attrs.hasRoiAndSizes && ctx.hasInput(3) && ctx.input(3).numel() > 0;
  if (useSizes) {
    std::vector<int64_t> sizes = ctx.input(3).toInt64Vector();
    std::vector<double> ratios;
    for (size_t i = 0; i < axes.size(); ++i)
      ratios.push_back(static_cast<double>(sizes[i]) / static_cast<double>(in[axes[i]]));
    if (attrs.aspectPolicy != "stretch") {
      double shared = attrs.aspectPolicy == "not_larger"
                          ? *std::min_element(ratios.begin(), ratios.end())
                          : *std::max_element(ratios.begin(), ratios.end());
      std::fill(ratios.begin(), ratios.end(), shared);
    }
    for (size_t i = 0; i < axes.size(); ++i) params[axes[i]].scale = ratios[i];
  } else {
    std::vector<double> scales;
    if (attrs.scalesFromAttr) {
      scales.assign(attrs.scalesAttr.begin(), attrs.scalesAttr.end());
    } else {
      scales = readDoubles(ctx.input(attrs.hasRoiAndSizes ? 2 : 1));
    }
    for (size_t i = 0; i < axes.size(); ++i) params[axes[i]].scale = scales[i];
  }
  if (attrs.transform == Transform::kTfCropAndResize) {
    if (!ctx.hasInput(1) || ctx.input(1).numel() != static_cast<int64_t>(2 * axes.size())) {
      ctx.fail("tf_crop_and_resize needs a 'roi' input with " + std::to_string(2 * axes.size()) +
               " values");
    }
    std::vector<double> roi = readDoubles(ctx.input(1));
    for (size_t i = 0; i < axes.size(); ++i) {
      params[axes[i]].roiStart = roi[i];
      params[axes[i]].roiEnd = roi[i + axes.size()];
    }
  }
  return params;
}

KernelFn makeResizeKernel(const KernelCreateInfo& info) {
  ResizeAttrs attrs = parseResizeAttrs(info.node);
  return [attrs, opType = info.node.opType](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.output(0);
    if (y.numel() == 0) return;
    std::vector<AxisParams> params = axisParams(ctx, attrs, x.shape(), y.shape());
    dispatchNumeric(x.dtype(), opType.c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      resizeTyped<T>(x, y, params, attrs);
    });
  };
}

KILN_REGISTER_CPU_KERNEL("Resize", KernelFactory(makeResizeKernel));
KILN_REGISTER_CPU_KERNEL("Upsample", KernelFactory(makeResizeKernel));

}  // namespace
}  // namespace kiln::cpu
