// CPU kernel of GridSample (N-d): each output point reads X at the grid's normalized coordinates
// (last grid axis ordered x, y, z = innermost spatial axis first), interpolated with nearest,
// (multi)linear or cubic taps. Out-of-range coordinates and taps follow padding_mode.
#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "ir/shape_helpers.h"

namespace kiln::cpu {
namespace {

enum class Interp { kNearest, kLinear, kCubic };
enum class Padding { kZeros, kBorder, kReflection };

/// The valid coordinate range of one spatial axis: pixel centers with align_corners, else pixel
/// edges.
struct AxisRange {
  int64_t size;
  double lo, hi;
};

/// Folds x back into [lo, hi] by mirroring at the edges as often as needed (x finite). The
/// mirror image repeats every 2 * span, so fmod keeps it exact for any distance.
double reflect(double x, double lo, double hi) {
  const double span = hi - lo;
  if (span <= 0) return lo;
  if (x < lo) {
    const double m = std::fmod(lo - x, 2 * span);
    return m <= span ? lo + m : hi - (m - span);
  }
  if (x > hi) {
    const double m = std::fmod(x - hi, 2 * span);
    return m <= span ? hi - m : lo + (m - span);
  }
  return x;
}

/// The index a tap at the integer i reads along one axis, or -1 when it reads padding zeros. i
/// stays a double: a cubic coordinate that only its taps pad may lie anywhere (past int64).
int64_t tapIndex(double i, const AxisRange& a, Padding padding) {
  const double last = static_cast<double>(a.size - 1);
  switch (padding) {
    case Padding::kZeros:
      return (i >= 0 && i <= last) ? static_cast<int64_t>(i) : -1;
    case Padding::kBorder:
      return static_cast<int64_t>(std::clamp(i, 0.0, last));
    case Padding::kReflection:
      return static_cast<int64_t>(std::clamp(reflect(i, a.lo, a.hi), 0.0, last));
  }
  return -1;
}

/// Keys cubic convolution weights (A = -0.75) for the taps at floor(x) - 1 .. floor(x) + 2, t = x -
/// floor(x).
void cubicWeights(double t, double* w) {
  constexpr double A = -0.75;
  auto nearW = [](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };       // |d| <= 1
  auto farW = [](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };  // 1 < |d| < 2
  w[0] = farW(t + 1);
  w[1] = nearW(t);
  w[2] = nearW(1 - t);
  w[3] = farW(2 - t);
}

struct Tap {
  int64_t index;
  double weight;
};

/// The taps of one axis for an unnormalized coordinate x. `padTapsOnly`: a cubic x outside the
/// range stays where it is and only its taps are padded (torch's grid_sample, which
/// onnxruntime's com.microsoft GridSample follows); ONNX's GridSample moves x in first.
int axisTaps(double x, const AxisRange& a, Interp interp, Padding padding, bool padTapsOnly,
             Tap* taps) {
  if (!std::isfinite(x)) {  // NaN or infinite: no input element is near it, so it reads zeros
    taps[0] = Tap{-1, 0.0};
    return 1;
  }
  // Far outside with zero padding every tap reads zeros; bring x near the input (taps still
  // outside it) so that its floor fits an int64.
  if (padding == Padding::kZeros) x = std::clamp(x, -4.0, static_cast<double>(a.size) + 3);
  if (interp == Interp::kNearest) x = std::nearbyint(x);  // half to even, as the reference rounds
  if ((x < a.lo || x > a.hi) && !(padTapsOnly && interp == Interp::kCubic)) {
    if (padding == Padding::kBorder)
      x = std::clamp(x, 0.0, static_cast<double>(a.size - 1));
    else if (padding == Padding::kReflection)
      x = reflect(x, a.lo, a.hi);
  }
  if (interp == Interp::kNearest) {
    taps[0] = Tap{tapIndex(x, a, padding), 1.0};
    return 1;
  }
  const double i0 = std::floor(x);
  const double t = x - i0;
  if (interp == Interp::kLinear) {
    taps[0] = Tap{tapIndex(i0, a, padding), 1 - t};
    taps[1] = Tap{tapIndex(i0 + 1, a, padding), t};
    return 2;
  }
  double w[4];
  cubicWeights(t, w);
  for (int k = 0; k < 4; ++k) taps[k] = Tap{tapIndex(i0 - 1 + k, a, padding), w[k]};
  return 4;
}

Interp parseInterp(const std::string& mode, const ir::Node& node) {
  if (mode == "nearest") return Interp::kNearest;
  if (mode == "bilinear" || mode == "linear") return Interp::kLinear;
  if (mode == "bicubic" || mode == "cubic") return Interp::kCubic;
  ir::failNode(node, "unknown mode '" + mode + "'", ErrorCode::kInvalidModel);
}

Padding parsePadding(const std::string& mode, const ir::Node& node) {
  if (mode == "zeros") return Padding::kZeros;
  if (mode == "border") return Padding::kBorder;
  if (mode == "reflection") return Padding::kReflection;
  ir::failNode(node, "unknown padding_mode '" + mode + "'", ErrorCode::kInvalidModel);
}

struct GridSampleAttrs {
  Interp interp = Interp::kLinear;
  Padding padding = Padding::kZeros;
  bool alignCorners = false;
  bool padCubicTapsOnly = false;  // com.microsoft's (torch's) cubic padding, see axisTaps
};

GridSampleAttrs gridSampleAttrs(const ir::Node& node) {
  return {parseInterp(ir::attrString(node, "mode", node.opset < 20 ? "bilinear" : "linear"), node),
          parsePadding(ir::attrString(node, "padding_mode", "zeros"), node),
          ir::attrInt(node, "align_corners", 0) != 0};
}

GridSampleAttrs contribGridSampleAttrs(const ir::Node& node) {
  GridSampleAttrs a = gridSampleAttrs(node);
  a.padCubicTapsOnly = true;
  return a;
}

void gridSampleKernel(KernelContext& ctx, const GridSampleAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  const Interp interp = attrs.interp;
  const Padding padding = attrs.padding;
  const bool alignCorners = attrs.alignCorners;
  if (x.rank() < 3)
    ctx.fail("X must have rank >= 3, got " + x.describe(), ErrorCode::kInvalidArgument);
  const size_t r = x.rank() - 2;
  if (grid.rank() != r + 2 || grid.dim(0) != x.dim(0) ||
      grid.shape().back() != static_cast<int64_t>(r)) {
    ctx.fail("grid " + grid.describe() + " does not match X " + x.describe(),
             ErrorCode::kInvalidArgument);
  }
  const int64_t batches = x.dim(0), channels = x.dim(1);
  std::vector<AxisRange> axes(r);
  std::vector<int64_t> strides(r);
  int64_t inSpatial = 1;
  for (size_t i = r; i-- > 0;) {
    const int64_t d = x.dim(i + 2);
    axes[i] = alignCorners ? AxisRange{d, 0.0, static_cast<double>(d - 1)}
                           : AxisRange{d, -0.5, static_cast<double>(d) - 0.5};
    strides[i] = inSpatial;
    inSpatial *= d;
  }
  Shape outShape{batches, channels};
  for (size_t i = 1; i <= r; ++i) outShape.push_back(grid.dim(i));
  Tensor& y = ctx.allocateOutput(0, x.dtype(), outShape);
  const int64_t outSpatial = shapeNumel(outShape) / std::max<int64_t>(1, batches * channels);
  if (y.numel() == 0) return;
  if (inSpatial == 0)
    ctx.fail("X " + x.describe() + " has an empty spatial axis", ErrorCode::kInvalidArgument);

  // Grid coordinates as the reference computes them: in the grid's own precision.
  std::vector<double> coords(static_cast<size_t>(grid.numel()));
  dispatchFloat(grid.dtype(), "GridSample grid", [&](auto tag) {
    using G = typename decltype(tag)::type;
    using C = ComputeType<G>;
    const G* g = grid.data<G>();
    const int64_t points = grid.numel() / static_cast<int64_t>(r);
    for (int64_t p = 0; p < points; ++p) {
      for (size_t k = 0; k < r; ++k) {
        const size_t axis = r - 1 - k;  // grid holds (x, y, z): innermost axis first
        const C n = static_cast<C>(g[p * static_cast<int64_t>(r) + k]);
        const C len = static_cast<C>(axes[axis].size);
        const C u =
            alignCorners ? (n + C(1)) / C(2) * (len - C(1)) : ((n + C(1)) * len - C(1)) / C(2);
        coords[p * r + axis] = static_cast<double>(u);
      }
    }
  });

  dispatchFloat(x.dtype(), "GridSample", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    std::vector<Tap> taps(r * 4);
    std::vector<int> counts(r);
    std::vector<int> pick(r);
    std::vector<std::pair<int64_t, double>>
        points;  // flattened spatial offset and weight of each tap combination
    for (int64_t n = 0; n < batches; ++n) {
      for (int64_t o = 0; o < outSpatial; ++o) {
        const double* c = coords.data() + (n * outSpatial + o) * static_cast<int64_t>(r);
        for (size_t i = 0; i < r; ++i)
          counts[i] =
              axisTaps(c[i], axes[i], interp, padding, attrs.padCubicTapsOnly, taps.data() + i * 4);
        points.clear();
        std::fill(pick.begin(), pick.end(), 0);
        while (true) {
          int64_t offset = 0;
          double weight = 1;
          for (size_t i = 0; i < r && offset >= 0; ++i) {
            const Tap& t = taps[i * 4 + pick[i]];
            offset = t.index < 0 ? -1 : offset + t.index * strides[i];
            weight *= t.weight;
          }
          if (offset >= 0) points.emplace_back(offset, weight);
          size_t i = r;
          while (i-- > 0 && ++pick[i] == counts[i]) pick[i] = 0;
          if (i == static_cast<size_t>(-1)) break;
        }
        for (int64_t ch = 0; ch < channels; ++ch) {
          const T* plane = px + (n * channels + ch) * inSpatial;
          double sum = 0;
          for (const auto& [off, w] : points)
            sum += w * static_cast<double>(static_cast<ComputeType<T>>(plane[off]));
          py[(n * channels + ch) * outSpatial + o] =
              static_cast<T>(static_cast<ComputeType<T>>(sum));
        }
      }
    }
  });
}

KILN_REGISTER_CPU_KERNEL("GridSample", bindKernel(gridSampleAttrs, gridSampleKernel));
// onnxruntime's com.microsoft GridSample (ir/ops/contrib_onnx_equivalents.cpp: ONNX's rule at
// opset 16), torch's cubic padding.
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "GridSample",
                                bindKernel(contribGridSampleAttrs, gridSampleKernel));

}  // namespace
}  // namespace kiln::cpu
