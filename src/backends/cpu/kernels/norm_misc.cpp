// CPU kernels for LpNormalization, MeanVarianceNormalization and LRN.
#include <algorithm>

#include "backends/cpu/kernels/norm_util.h"
#include "backends/cpu/kernels/run_checks.h"
#include "ir/shape_helpers.h"

namespace kiln::cpu {
namespace {

// x viewed as [outer, len, inner]; each (outer, inner) fibre is divided by its L1 or L2 norm.
template <typename T>
void lpNormalize(const Tensor& x, Tensor& y, int64_t axis, int64_t p) {
  using C = ComputeType<T>;
  const int64_t len = x.dim(static_cast<size_t>(axis));
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const int64_t outer = len * inner == 0 ? 0 : x.numel() / (len * inner);
  std::vector<C> norm(static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o) {
    const T* src = x.data<T>() + o * len * inner;
    T* dst = y.data<T>() + o * len * inner;
    std::fill(norm.begin(), norm.end(), C(0));
    for (int64_t l = 0; l < len; ++l) {
      const T* row = src + l * inner;
      for (int64_t i = 0; i < inner; ++i)
        norm[i] += p == 1 ? std::abs(C(row[i])) : C(row[i]) * C(row[i]);
    }
    if (p == 2) {
      for (C& v : norm) v = std::sqrt(v);
    }
    for (int64_t l = 0; l < len; ++l) {
      for (int64_t i = 0; i < inner; ++i) {
        dst[l * inner + i] =
            static_cast<T>(norm[i] == C(0) ? C(0) : C(src[l * inner + i]) / norm[i]);
      }
    }
  }
}

KernelFn makeLpNorm(const KernelCreateInfo& info) {
  const int64_t axisAttr = ir::attrInt(info.node, "axis", -1);
  const int64_t p = ir::attrInt(info.node, "p", 2);
  return [axisAttr, p](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const int64_t axis = normalizeAxis(ctx, axisAttr, static_cast<int64_t>(x.rank()));
    if (x.rank() == 0) ctx.fail("expects an input of rank >= 1", ErrorCode::kInvalidArgument);
    Tensor& y = ctx.output(0);
    dispatchFloat(x.dtype(), "LpNormalization",
                  [&](auto tag) { lpNormalize<typename decltype(tag)::type>(x, y, axis, p); });
  };
}

// For each element, the index of its statistics slot (the element's index with `axes` dropped).
std::vector<int64_t> statSlots(const Shape& shape, const std::vector<bool>& reduced) {
  std::vector<int64_t> slotStride(shape.size(), 0);
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (!reduced[d]) {
      slotStride[d] = stride;
      stride *= shape[d];
    }
  }
  std::vector<int64_t> slots(static_cast<size_t>(shapeNumel(shape)));
  std::vector<int64_t> index(shape.size(), 0);
  int64_t slot = 0;
  for (int64_t& s : slots) {
    s = slot;
    for (size_t d = shape.size(); d-- > 0;) {  // odometer step
      slot += slotStride[d];
      if (++index[d] < shape[d]) break;
      slot -= slotStride[d] * shape[d];
      index[d] = 0;
    }
  }
  return slots;
}

// y = (x - mean) / (std + 1e-9) over the reduced axes, as MeanVarianceNormalization's function
// body.
template <typename T>
void meanVarianceNormalize(const Tensor& x, Tensor& y, const std::vector<bool>& reduced,
                           bool normalizeVariance) {
  using C = ComputeType<T>;
  std::vector<int64_t> slots = statSlots(x.shape(), reduced);
  int64_t slotCount = 1;
  for (size_t d = 0; d < x.rank(); ++d) slotCount *= reduced[d] ? 1 : x.dim(d);
  const double count = slotCount == 0 ? 1.0 : static_cast<double>(x.numel() / slotCount);
  std::vector<double> mean(static_cast<size_t>(slotCount), 0.0),
      var(static_cast<size_t>(slotCount), 0.0);
  const T* src = x.data<T>();
  for (size_t i = 0; i < slots.size(); ++i) mean[slots[i]] += static_cast<double>(C(src[i]));
  for (double& m : mean) m /= count;
  for (size_t i = 0; i < slots.size(); ++i) {
    const double d = static_cast<double>(C(src[i])) - mean[slots[i]];
    var[slots[i]] += d * d;
  }
  std::vector<double> scale(var.size(), 1.0);
  if (normalizeVariance) {
    for (size_t s = 0; s < var.size(); ++s) scale[s] = 1.0 / (std::sqrt(var[s] / count) + 1e-9);
  }
  T* dst = y.data<T>();
  for (size_t i = 0; i < slots.size(); ++i) {
    dst[i] = static_cast<T>(
        static_cast<C>((static_cast<double>(C(src[i])) - mean[slots[i]]) * scale[slots[i]]));
  }
}

KernelFn makeMeanVarianceNorm(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  std::vector<int64_t> axes = {0, 2, 3};
  bool normalizeVariance = true;
  if (node.opset < 9) {  // MVN-1: across_channels / normalize_variance on N x C x H x W
    axes = ir::attrInt(node, "across_channels", 0) ? std::vector<int64_t>{1, 2, 3}
                                                   : std::vector<int64_t>{2, 3};
    normalizeVariance = ir::attrInt(node, "normalize_variance", 1) != 0;
  } else {
    axes = ir::attrInts(node, "axes", axes);
  }
  return [axes, normalizeVariance](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    std::vector<bool> reduced(x.rank(), false);
    for (int64_t a : axes)
      reduced[static_cast<size_t>(normalizeAxis(ctx, a, static_cast<int64_t>(x.rank())))] = true;
    Tensor& y = ctx.output(0);
    dispatchFloat(x.dtype(), "MeanVarianceNormalization", [&](auto tag) {
      meanVarianceNormalize<typename decltype(tag)::type>(x, y, reduced, normalizeVariance);
    });
  };
}

// y = x / (bias + alpha / size * sum of x^2 over the neighbouring channels)^beta.
template <typename T>
void localResponseNormalize(const Tensor& x, Tensor& y, int64_t size, double alpha, double beta,
                            double bias) {
  using C = ComputeType<T>;
  const int64_t n = x.dim(0);
  const int64_t channels = x.dim(1);
  const int64_t inner = n * channels == 0 ? 0 : x.numel() / (n * channels);
  const int64_t before = (size - 1) / 2;
  const int64_t after = size / 2;  // ceil((size - 1) / 2)
  std::vector<C> sum(static_cast<size_t>(inner));
  const C scale = static_cast<C>(alpha / static_cast<double>(size));
  for (int64_t b = 0; b < n; ++b) {
    const T* plane = x.data<T>() + b * channels * inner;
    T* out = y.data<T>() + b * channels * inner;
    for (int64_t c = 0; c < channels; ++c) {
      std::fill(sum.begin(), sum.end(), C(0));
      for (int64_t k = std::max<int64_t>(0, c - before); k <= std::min(channels - 1, c + after);
           ++k) {
        const T* row = plane + k * inner;
        for (int64_t i = 0; i < inner; ++i) sum[i] += C(row[i]) * C(row[i]);
      }
      const T* src = plane + c * inner;
      for (int64_t i = 0; i < inner; ++i) {
        out[c * inner + i] = static_cast<T>(
            C(src[i]) / std::pow(static_cast<C>(bias) + scale * sum[i], static_cast<C>(beta)));
      }
    }
  }
}

KernelFn makeLrn(const KernelCreateInfo& info) {
  const int64_t size = ir::attrInt(info.node, "size");
  const double alpha = ir::attrFloat(info.node, "alpha", 1e-4f);
  const double beta = ir::attrFloat(info.node, "beta", 0.75f);
  const double bias = ir::attrFloat(info.node, "bias", 1.0f);
  return [size, alpha, beta, bias](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.output(0);
    dispatchFloat(x.dtype(), "LRN", [&](auto tag) {
      localResponseNormalize<typename decltype(tag)::type>(x, y, size, alpha, beta, bias);
    });
  };
}

KILN_REGISTER_CPU_KERNEL("LpNormalization", KernelFactory(makeLpNorm));
KILN_REGISTER_CPU_KERNEL("MeanVarianceNormalization", KernelFactory(makeMeanVarianceNorm));
KILN_REGISTER_CPU_KERNEL("LRN", KernelFactory(makeLrn));

}  // namespace
}  // namespace kiln::cpu
