// CPU kernels of small self-contained com.microsoft ops (ir/ops/contrib_misc.cpp): Inverse
// (Gauss-Jordan elimination with partial pivoting in double precision), CDist (pairwise squared
// or plain Euclidean distances, summed in double), MurmurHash3 (x86_32 over each element's
// bytes), SampleOp (a copy) and CropAndResize (TensorFlow's crop_and_resize on NCHW data, in
// float as onnxruntime computes it) and MaxpoolWithMask (max pooling that a zero in the mask
// stops, with onnxruntime's reading of the mask).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "ir/ops/pool_geometry.h"

namespace kiln::cpu {
namespace {

// Inverts the n x n row-major matrix `a` (destroyed) into `inv`. A singular matrix gives
// infinities and NaNs, as onnxruntime's LU-based inverse does.
void invertMatrix(std::vector<double>& a, std::vector<double>& inv, int64_t n) {
  std::fill(inv.begin(), inv.end(), 0.0);
  for (int64_t i = 0; i < n; ++i) inv[i * n + i] = 1.0;
  for (int64_t col = 0; col < n; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < n; ++r)
      if (std::fabs(a[r * n + col]) > std::fabs(a[pivot * n + col])) pivot = r;
    if (pivot != col) {
      for (int64_t c = 0; c < n; ++c) {
        std::swap(a[pivot * n + c], a[col * n + c]);
        std::swap(inv[pivot * n + c], inv[col * n + c]);
      }
    }
    const double scale = 1.0 / a[col * n + col];
    for (int64_t c = 0; c < n; ++c) {
      a[col * n + c] *= scale;
      inv[col * n + c] *= scale;
    }
    for (int64_t r = 0; r < n; ++r) {
      if (r == col) continue;
      const double f = a[r * n + col];
      if (f == 0.0) continue;
      for (int64_t c = 0; c < n; ++c) {
        a[r * n + c] -= f * a[col * n + c];
        inv[r * n + c] -= f * inv[col * n + c];
      }
    }
  }
}

void inverseKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2))
    ctx.fail("X must hold square matrices [*, n, n], got " + x.describe(),
             ErrorCode::kInvalidArgument);
  const int64_t n = x.dim(x.rank() - 1);
  const int64_t matrices = n == 0 ? 0 : x.numel() / (n * n);
  Tensor& y = ctx.output(0);
  dispatchFloat(x.dtype(), "Inverse", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const T* in = x.data<T>();
    T* out = y.data<T>();
    std::vector<double> a(static_cast<size_t>(n * n)), inv(a.size());
    for (int64_t m = 0; m < matrices; ++m) {
      for (int64_t i = 0; i < n * n; ++i)
        a[i] = static_cast<double>(static_cast<C>(in[m * n * n + i]));
      invertMatrix(a, inv, n);
      for (int64_t i = 0; i < n * n; ++i)
        out[m * n * n + i] = static_cast<T>(static_cast<C>(inv[i]));
    }
  });
}

void cdistKernel(KernelContext& ctx, bool squared) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.rank() != 2 || b.rank() != 2 || a.dim(1) != b.dim(1))
    ctx.fail("A [N, K] and B [M, K] expected, got A " + a.describe() + " and B " + b.describe(),
             ErrorCode::kInvalidArgument);
  const int64_t rows = a.dim(0), cols = b.dim(0), k = a.dim(1);
  Tensor& c = ctx.output(0);
  dispatchFloat(a.dtype(), "CDist", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* out = c.data<T>();
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        double sum = 0;
        for (int64_t d = 0; d < k; ++d) {
          const double diff =
              static_cast<double>(pa[i * k + d]) - static_cast<double>(pb[j * k + d]);
          sum += diff * diff;
        }
        out[i * cols + j] = static_cast<T>(squared ? sum : std::sqrt(sum));
      }
    }
  });
}

bool cdistSquared(const ir::Node& node) {
  return ir::attrString(node, "metric", "sqeuclidean") == "sqeuclidean";
}

uint32_t rotateLeft(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

// MurmurHash3_x86_32 of `len` bytes.
uint32_t murmur3(const uint8_t* data, size_t len, uint32_t seed) {
  constexpr uint32_t c1 = 0xcc9e2d51u, c2 = 0x1b873593u;
  auto mixBlock = [&](uint32_t k) {
    k *= c1;
    k = rotateLeft(k, 15);
    return k * c2;
  };
  uint32_t h = seed;
  const size_t blocks = len / 4;
  for (size_t i = 0; i < blocks; ++i) {
    const uint8_t* p = data + 4 * i;
    const uint32_t k =
        uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
    h ^= mixBlock(k);
    h = rotateLeft(h, 13);
    h = h * 5 + 0xe6546b64u;
  }
  const uint8_t* tail = data + 4 * blocks;
  uint32_t k = 0;
  for (size_t i = len & 3; i-- > 0;) k |= uint32_t{tail[i]} << (8 * i);
  if (len & 3) h ^= mixBlock(k);
  h ^= static_cast<uint32_t>(len);
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

void murmurHash3Kernel(KernelContext& ctx, uint32_t seed) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  auto* out = static_cast<uint32_t*>(y.raw());  // int32 or uint32: the same bits
  if (x.dtype() == DataType::kString) {
    const std::string* in = x.data<std::string>();
    for (int64_t i = 0; i < x.numel(); ++i)
      out[i] = murmur3(reinterpret_cast<const uint8_t*>(in[i].data()), in[i].size(), seed);
    return;
  }
  const size_t bytes = dataTypeSize(x.dtype());
  const auto* in = static_cast<const uint8_t*>(x.raw());  // little-endian element bytes
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = murmur3(in + i * bytes, bytes, seed);
}

void sampleOpKernel(KernelContext& ctx) { ctx.setOutput(0, ctx.input(0).clone()); }

struct CropAndResizeAttrs {
  bool nearest = false;
  float extrapolation = 0.0f;
};

CropAndResizeAttrs cropAndResizeAttrs(const ir::Node& node) {
  return {ir::attrString(node, "mode", "bilinear") == "nearest",
          ir::attrFloat(node, "extrapolation_value", 0.0f)};
}

// The source coordinate of output position p of `count` along an axis of `size` for a box from
// `lo` to `hi` (normalized): the box's ends exactly at the first and last positions.
float cropCoordinate(int64_t p, int64_t count, float lo, float hi, int64_t size) {
  const auto last = static_cast<float>(size - 1);
  if (count <= 1)  // in double, as onnxruntime computes it
    return static_cast<float>(0.5 * static_cast<double>(lo + hi) * static_cast<double>(size - 1));
  if (p == 0) return lo * last;
  if (p == count - 1) return hi * last;
  const float scale = (hi - lo) * last / static_cast<float>(count - 1);
  return lo * last + static_cast<float>(p) * scale;
}

void cropAndResizeKernel(KernelContext& ctx, const CropAndResizeAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  const Tensor& batchIndices = ctx.input(2);
  const Tensor& cropSize = ctx.input(3);
  if (x.rank() != 4)
    ctx.fail("X must be [N, C, H, W], got " + x.describe(), ErrorCode::kInvalidArgument);
  if (rois.rank() != 2 || rois.dim(1) != 4 || batchIndices.rank() != 1 ||
      batchIndices.dim(0) != rois.dim(0))
    ctx.fail("rois [num_rois, 4] and batch_indices [num_rois] expected, got rois " +
                 rois.describe() + " and batch_indices " + batchIndices.describe(),
             ErrorCode::kInvalidArgument);
  if (cropSize.numel() != 2)
    ctx.fail("crop_size must hold (height, width), got " + cropSize.describe(),
             ErrorCode::kInvalidArgument);
  const int64_t boxes = rois.dim(0), channels = x.dim(1), height = x.dim(2), width = x.dim(3);
  const int64_t cropH = cropSize.intAt(0), cropW = cropSize.intAt(1);
  Tensor& y = ctx.output(0);
  const float* px = x.data<float>();
  const float* box = rois.data<float>();
  const int32_t* batch = batchIndices.data<int32_t>();
  float* py = y.data<float>();
  const int64_t plane = cropH * cropW;
  for (int64_t b = 0; b < boxes; ++b) {
    if (batch[b] < 0 || batch[b] >= x.dim(0))
      ctx.fail("batch_indices[" + std::to_string(b) + "] = " + std::to_string(batch[b]) +
                   " is out of range for " + std::to_string(x.dim(0)) + " images",
               ErrorCode::kInvalidArgument);
    const float* r = box + 4 * b;  // y1, x1, y2, x2
    const float* image = px + batch[b] * channels * height * width;
    float* out = py + b * channels * plane;
    for (int64_t ph = 0; ph < cropH; ++ph) {
      const float inY = cropCoordinate(ph, cropH, r[0], r[2], height);
      for (int64_t pw = 0; pw < cropW; ++pw) {
        const float inX = cropCoordinate(pw, cropW, r[1], r[3], width);
        const int64_t o = ph * cropW + pw;
        if (!(inY >= 0 && inY <= static_cast<float>(height - 1) && inX >= 0 &&
              inX <= static_cast<float>(width - 1))) {
          for (int64_t c = 0; c < channels; ++c) out[c * plane + o] = attrs.extrapolation;
          continue;
        }
        if (attrs.nearest) {
          const auto at =
              static_cast<int64_t>(std::round(inY)) * width + static_cast<int64_t>(std::round(inX));
          for (int64_t c = 0; c < channels; ++c)
            out[c * plane + o] = image[c * height * width + at];
          continue;
        }
        const auto top = static_cast<int64_t>(std::floor(inY)),
                   bottom = static_cast<int64_t>(std::ceil(inY));
        const auto left = static_cast<int64_t>(std::floor(inX)),
                   right = static_cast<int64_t>(std::ceil(inX));
        const float dy = inY - static_cast<float>(top), dx = inX - static_cast<float>(left);
        for (int64_t c = 0; c < channels; ++c) {
          const float* p = image + c * height * width;
          const float t =
              p[top * width + left] + (p[top * width + right] - p[top * width + left]) * dx;
          const float u = p[bottom * width + left] +
                          (p[bottom * width + right] - p[bottom * width + left]) * dx;
          out[c * plane + o] = t + (u - t) * dy;
        }
      }
    }
  }
}

struct MaskPoolAttrs {
  ir::Node label;
  ir::PoolAttrs pool;
};

MaskPoolAttrs maskPoolAttrs(const KernelCreateInfo& info) {
  const ir::TypeInfo* x = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  if (!x || !x->shape || x->shape->size() < 3 || x->shape->size() > 5)
    ir::failNode(info.node, "X needs a known rank of 3 to 5");
  return {nodeLabel(info.node), ir::readPoolAttrs(info.node, x->shape->size() - 2)};
}

// onnxruntime's MaxpoolWithMask ("for internal use"), as its CPU kernel computes it: channel c
// (of N * C) reads the mask from element (c * spatial size) mod (mask N * mask C) on; a window
// scans its innermost axis in order and a zero in the mask ends that scan (in 2-D and 3-D, the
// mask's element 0 is never tested); a window with nothing read gives float's lowest value.
void maxpoolWithMaskKernel(KernelContext& ctx, const MaskPoolAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const Tensor& m = ctx.input(1);
  const size_t r = x.rank() - 2;
  if (m.rank() != x.rank())
    ctx.fail("M " + m.describe() + " must have X's rank, X " + x.describe(),
             ErrorCode::kInvalidArgument);
  for (size_t i = 2; i < x.rank(); ++i)
    if (m.dim(i) != x.dim(i))
      ctx.fail("M " + m.describe() + " must have X's spatial dims, X " + x.describe(),
               ErrorCode::kInvalidArgument);
  const int64_t channels = x.dim(0) * x.dim(1), maskChannels = m.dim(0) * m.dim(1);
  if (channels > 0 && maskChannels == 0)
    ctx.fail("M " + m.describe() + " has no channels", ErrorCode::kInvalidArgument);
  const std::vector<ir::PoolDim> dims = ir::resolvePoolDims(attrs.label, attrs.pool, x.shape());
  int64_t inSpatial = 1, outSpatial = 1;
  for (const ir::PoolDim& d : dims) {
    inSpatial *= d.in;
    outSpatial *= d.out;
  }
  // Each axis padded out to 3 (unit axes), so that one loop nest serves 1 to 3 spatial dims.
  std::array<ir::PoolDim, 3> a;
  for (size_t i = 0; i < 3; ++i) a[i] = i < r ? dims[i] : ir::PoolDim{1, 1, 1, 1, 1, 0, 0};
  Tensor& y = ctx.output(0);
  const float* px = x.data<float>();
  const int32_t* pm = m.data<int32_t>();
  float* py = y.data<float>();
  auto window = [](const ir::PoolDim& d, int64_t o) {
    const int64_t start = o * d.stride - d.padBegin;
    return std::pair<int64_t, int64_t>{std::max<int64_t>(start, 0),
                                       std::min(start + d.kernel, d.in)};
  };
  for (int64_t c = 0; c < channels; ++c) {
    const float* xc = px + c * inSpatial;
    const int32_t* mc = pm + (c * inSpatial) % maskChannels;
    float* yc = py + c * outSpatial;
    for (int64_t o0 = 0; o0 < a[0].out; ++o0) {
      const auto [h0, h1] = window(a[0], o0);
      for (int64_t o1 = 0; o1 < a[1].out; ++o1) {
        const auto [w0, w1] = window(a[1], o1);
        for (int64_t o2 = 0; o2 < a[2].out; ++o2) {
          const auto [d0, d1] = window(a[2], o2);
          float best = std::numeric_limits<float>::lowest();
          // A zero ends the scan along the last real spatial axis: loop level r - 1 (0: h).
          bool stop = false;
          for (int64_t h = h0; h < h1 && !(stop && r == 1); ++h) {
            stop = false;
            for (int64_t w = w0; w < w1 && !(stop && r <= 2); ++w) {
              stop = false;
              for (int64_t d = d0; d < d1 && !stop; ++d) {
                const int64_t i = (h * a[1].in + w) * a[2].in + d;
                stop = (r == 1 || i > 0) && mc[i] == 0;
                if (!stop) best = std::max(best, xc[i]);
              }
            }
          }
          yc[(o0 * a[1].out + o1) * a[2].out + o2] = best;
        }
      }
    }
  }
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "MaxpoolWithMask",
                                bindKernel(maskPoolAttrs, maxpoolWithMaskKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "Inverse", KernelFn(inverseKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "CDist", bindKernel(cdistSquared, cdistKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "MurmurHash3",
                                bindKernel(
                                    [](const ir::Node& node) {
                                      return static_cast<uint32_t>(ir::attrInt(node, "seed", 0));
                                    },
                                    murmurHash3Kernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "SampleOp", KernelFn(sampleOpKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "CropAndResize",
                                bindKernel(cropAndResizeAttrs, cropAndResizeKernel));

}  // namespace kiln::cpu
