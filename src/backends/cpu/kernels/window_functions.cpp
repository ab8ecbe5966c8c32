// CPU kernels of the generated signal tensors: HannWindow, HammingWindow, BlackmanWindow
// (periodic windows use N = size, symmetric ones N = size - 1) and MelWeightMatrix (triangular
// filters between mel-spaced frequency bins). Values are computed in double and then converted
// to output_datatype.
#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"

namespace kiln::cpu {
namespace {

int64_t scalarInt(KernelContext& ctx, size_t i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1)
    ctx.fail(std::string(what) + " must hold one value, got " + t.describe(),
             ErrorCode::kInvalidArgument);
  return t.intAt(0);
}

double scalarDouble(KernelContext& ctx, size_t i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1)
    ctx.fail(std::string(what) + " must hold one value, got " + t.describe(),
             ErrorCode::kInvalidArgument);
  return t.doubleAt(0);
}

struct WindowAttrs {
  DataType type = DataType::kFloat32;  // output_datatype
  bool periodic = true;                // the cosine-sum windows
};

WindowAttrs windowAttrs(const ir::Node& node) {
  return {static_cast<DataType>(ir::attrInt(node, "output_datatype", 1)),
          ir::attrInt(node, "periodic", 1) != 0};
}

/// Output 0 of `shape` in output_datatype and a zeroed scratch of as many doubles to compute it
/// in, both checked against the allocation limit first: the sizes come from run-time values.
std::pair<Tensor*, double*> windowBuffers(KernelContext& ctx, const WindowAttrs& attrs,
                                          Shape shape) {
  Tensor& y = ctx.allocateOutput(0, attrs.type, std::move(shape));
  const auto count = static_cast<size_t>(y.numel());
  auto* values = static_cast<double*>(ctx.workspace(count * sizeof(double)));
  std::fill_n(values, count, 0.0);
  return {&y, values};
}

void storeAs(const WindowAttrs& attrs, const double* values, Tensor& y) {
  dispatchNumeric(attrs.type, "output_datatype", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = y.data<T>();
    for (int64_t i = 0; i < y.numel(); ++i) out[i] = convertNumber<T>(values[i]);
  });
}

/// w[n] = sum_j a_j cos(2 pi j n / N) for the cosine-sum window with coefficients a.
template <size_t K>
void cosineSumWindow(KernelContext& ctx, const WindowAttrs& attrs, const std::array<double, K>& a) {
  const int64_t size = scalarInt(ctx, 0, "size");
  if (size < 0)
    ctx.fail("size must not be negative, got " + std::to_string(size), ErrorCode::kInvalidArgument);
  const bool periodic = attrs.periodic;
  const auto period = static_cast<double>(periodic ? size : size - 1);
  auto [y, w] = windowBuffers(ctx, attrs, {size});
  for (int64_t n = 0; n < size; ++n) {
    double v = 0;
    for (size_t j = 0; j < K; ++j)
      v += a[j] * std::cos(2.0 * std::numbers::pi * static_cast<double>(j * n) / period);
    w[n] = v;
  }
  storeAs(attrs, w, *y);
}

void hannWindowKernel(KernelContext& ctx, const WindowAttrs& attrs) {
  cosineSumWindow<2>(ctx, attrs, {0.5, -0.5});
}
void hammingWindowKernel(KernelContext& ctx, const WindowAttrs& attrs) {
  cosineSumWindow<2>(ctx, attrs, {25.0 / 46.0, -21.0 / 46.0});
}
void blackmanWindowKernel(KernelContext& ctx, const WindowAttrs& attrs) {
  cosineSumWindow<3>(ctx, attrs, {0.42, -0.5, 0.08});
}

/// a // b as numpy computes it for positive floats (via fmod, so exact multiples do not round
/// down).
double floorDivide(double a, double b) {
  const double mod = std::fmod(a, b);
  const double div = (a - mod) / b;
  double floored = std::floor(div);
  if (div - floored > 0.5) floored += 1;
  return floored;
}

void melWeightMatrixKernel(KernelContext& ctx, const WindowAttrs& attrs) {
  const int64_t bins = scalarInt(ctx, 0, "num_mel_bins");
  const int64_t dftLength = scalarInt(ctx, 1, "dft_length");
  const int64_t sampleRate = scalarInt(ctx, 2, "sample_rate");
  const double lower = scalarDouble(ctx, 3, "lower_edge_hertz");
  const double upper = scalarDouble(ctx, 4, "upper_edge_hertz");
  if (bins < 1 || dftLength < 1 || sampleRate < 1) {
    ctx.fail("num_mel_bins, dft_length and sample_rate must be positive",
             ErrorCode::kInvalidArgument);
  }
  if (lower < 0 || upper < lower) {
    ctx.fail("need 0 <= lower_edge_hertz <= upper_edge_hertz", ErrorCode::kInvalidArgument);
  }
  const int64_t rows = dftLength / 2 + 1;
  int64_t weights = 0;
  if (__builtin_mul_overflow(rows, bins, &weights))
    ctx.fail("a [" + std::to_string(rows) + " x " + std::to_string(bins) +
                 "] weight matrix has more elements than int64 holds",
             ErrorCode::kInvalidArgument);
  // Plain variables, not a structured binding: the lambda below captures w.
  const std::pair<Tensor*, double*> buffers = windowBuffers(ctx, attrs, {rows, bins});
  Tensor* y = buffers.first;
  double* w = buffers.second;
  // Edges of the triangles: num_mel_bins + 2 points evenly spaced in mel, mapped to DFT bins.
  auto toMel = [](double hz) { return 2595.0 * std::log1p(hz / 700.0) / std::log(10.0); };
  const double lowMel = toMel(lower);
  const double melStep = (toMel(upper) - lowMel) / static_cast<double>(bins + 2);
  std::vector<int64_t> edge(static_cast<size_t>(bins + 2));
  for (int64_t i = 0; i < bins + 2; ++i) {
    const double hz =
        700.0 * std::expm1((static_cast<double>(i) * melStep + lowMel) / 2595.0 * std::log(10.0));
    const double bin =
        floorDivide(static_cast<double>(dftLength + 1) * hz, static_cast<double>(sampleRate));
    // A frequency past the DFT's bins (or NaN) becomes an edge just outside them, which `at`
    // refuses; converted as it is, it may have no int64 value.
    edge[i] = std::isnan(bin)
                  ? -1
                  : static_cast<int64_t>(std::clamp(bin, -1.0, static_cast<double>(rows)));
  }
  auto at = [&](int64_t row, int64_t col) -> double& {
    if (row < 0 || row >= rows)
      ctx.fail("mel filter edge " + std::to_string(row) + " falls outside the " +
                   std::to_string(rows) + " DFT bins",
               ErrorCode::kInvalidArgument);
    return w[row * bins + col];
  };
  for (int64_t i = 0; i < bins; ++i) {
    const int64_t left = edge[i], center = edge[i + 1], right = edge[i + 2];
    if (center == left) {
      at(center, i) = 1;
    } else {
      for (int64_t j = left; j <= center; ++j)
        at(j, i) = static_cast<double>(j - left) / static_cast<double>(center - left);
    }
    for (int64_t j = center; j < right; ++j)
      at(j, i) = static_cast<double>(right - j) / static_cast<double>(right - center);
  }
  storeAs(attrs, w, *y);
}

KILN_REGISTER_CPU_KERNEL("HannWindow", bindKernel(windowAttrs, hannWindowKernel));
KILN_REGISTER_CPU_KERNEL("HammingWindow", bindKernel(windowAttrs, hammingWindowKernel));
KILN_REGISTER_CPU_KERNEL("BlackmanWindow", bindKernel(windowAttrs, blackmanWindowKernel));
KILN_REGISTER_CPU_KERNEL("MelWeightMatrix", bindKernel(windowAttrs, melWeightMatrixKernel));

}  // namespace
}  // namespace kiln::cpu
