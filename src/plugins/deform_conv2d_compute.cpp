// torchvision-exact deformable convolution: shape checks, deformable im2col, grouped GEMM.
#include "plugins/deform_conv2d_compute.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "kiln/plugin.h"

namespace kiln::plugins {
namespace {

std::string dimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

Status invalid(const std::string& node, const std::string& what) {
  return Status(ErrorCode::kInvalidValue, "deform_conv2d node '" + node + "': " + what);
}

// torchvision's bilinear_interpolate for deformable convolution: 0 for a point at or beyond one
// pixel outside the image, and neighbours outside the image count as 0 (no border clamping).
float sampleBilinear(const float* plane, int64_t height, int64_t width, float y, float x) {
  if (y <= -1.0f || y >= static_cast<float>(height) || x <= -1.0f || x >= static_cast<float>(width))
    return 0.0f;
  const float yFloor = std::floor(y), xFloor = std::floor(x);
  const int64_t y0 = static_cast<int64_t>(yFloor), x0 = static_cast<int64_t>(xFloor);
  const int64_t y1 = y0 + 1, x1 = x0 + 1;
  const float ly = y - yFloor, lx = x - xFloor, hy = 1.0f - ly, hx = 1.0f - lx;
  const float v00 = (y0 >= 0 && x0 >= 0) ? plane[y0 * width + x0] : 0.0f;
  const float v01 = (y0 >= 0 && x1 < width) ? plane[y0 * width + x1] : 0.0f;
  const float v10 = (y1 < height && x0 >= 0) ? plane[y1 * width + x0] : 0.0f;
  const float v11 = (y1 < height && x1 < width) ? plane[y1 * width + x1] : 0.0f;
  return hy * hx * v00 + hy * lx * v01 + ly * hx * v10 + ly * lx * v11;
}

// Columns of C computed together: a block of B (depth x kColumnBlock floats) stays in cache while
// every row of A is multiplied into it.
constexpr int64_t kColumnBlock = 256;

// C[m x n] += A[m x k] * B[k x n], all row-major and dense; split over the threads by blocks of
// C's columns and rows. The innermost loop runs along a row of B, so the compiler vectorizes it.
void multiplyAdd(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
  const int64_t columnBlocks = (n + kColumnBlock - 1) / kColumnBlock;
  parallelFor(columnBlocks * m, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t j0 = (task / m) * kColumnBlock, j1 = std::min(n, j0 + kColumnBlock);
      const int64_t i = task % m;
      float* row = c + i * n;
      for (int64_t p = 0; p < k; ++p) {
        const float scale = a[i * k + p];
        const float* source = b + p * n;
        for (int64_t j = j0; j < j1; ++j) row[j] += scale * source[j];
      }
    }
  });
}

}  // namespace

Result<DeformConv2dParams> deformConv2dParams(const std::string& node, const DeformConv2dAttrs& a,
                                              const std::vector<int64_t>& inputDims,
                                              const std::vector<int64_t>& weightDims,
                                              const std::vector<int64_t>& offsetDims,
                                              const std::optional<std::vector<int64_t>>& maskDims,
                                              const std::optional<std::vector<int64_t>>& biasDims) {
  if (a.strideH <= 0 || a.strideW <= 0)
    return invalid(node, "stride must be positive, got [" + std::to_string(a.strideH) + ", " +
                             std::to_string(a.strideW) + "]");
  if (a.padH < 0 || a.padW < 0)
    return invalid(node, "padding must be >= 0, got [" + std::to_string(a.padH) + ", " +
                             std::to_string(a.padW) + "]");
  if (a.dilationH <= 0 || a.dilationW <= 0)
    return invalid(node, "dilation must be positive, got [" + std::to_string(a.dilationH) + ", " +
                             std::to_string(a.dilationW) + "]");
  if (a.groups <= 0 || a.offsetGroups <= 0)
    return invalid(node, "groups and offset_groups must be positive, got " +
                             std::to_string(a.groups) + " and " + std::to_string(a.offsetGroups));
  const std::pair<const char*, const std::vector<int64_t>*> fourD[] = {
      {"input", &inputDims}, {"weight", &weightDims}, {"offset", &offsetDims}};
  for (const auto& [name, dims] : fourD)
    if (dims->size() != 4)
      return invalid(node, std::string(name) + " must be 4-D, got shape " + dimsText(*dims));
  if (maskDims && maskDims->size() != 4)
    return invalid(node, "mask must be 4-D, got shape " + dimsText(*maskDims));

  DeformConv2dParams p;
  p.batch = inputDims[0], p.inChannels = inputDims[1], p.inHeight = inputDims[2],
  p.inWidth = inputDims[3];
  p.outChannels = weightDims[0], p.kernelHeight = weightDims[2], p.kernelWidth = weightDims[3];
  p.strideH = a.strideH, p.strideW = a.strideW, p.padH = a.padH, p.padW = a.padW;
  p.dilationH = a.dilationH, p.dilationW = a.dilationW, p.groups = a.groups,
  p.offsetGroups = a.offsetGroups;
  const int64_t taps = p.kernelHeight * p.kernelWidth;

  if (p.kernelHeight <= 0 || p.kernelWidth <= 0)
    return invalid(node, "weight has an empty kernel, shape " + dimsText(weightDims));
  if (weightDims[1] * p.groups != p.inChannels)
    return invalid(node, "weight shape " + dimsText(weightDims) +
                             " with groups = " + std::to_string(p.groups) + " needs " +
                             std::to_string(p.inChannels) + " input channels / groups = dim 1 of " +
                             std::to_string(p.inChannels / p.groups) + " (input shape " +
                             dimsText(inputDims) + ")");
  if (p.outChannels % p.groups != 0)
    return invalid(
        node, "weight's " + std::to_string(p.outChannels) +
                  " output channels are not divisible by groups = " + std::to_string(p.groups));
  if (p.inChannels % p.offsetGroups != 0)
    return invalid(node, "input's " + std::to_string(p.inChannels) +
                             " channels are not divisible by offset_groups = " +
                             std::to_string(p.offsetGroups));
  const int64_t outH = p.outHeight(), outW = p.outWidth();
  if (outH <= 0 || outW <= 0)
    return invalid(node, "the output would be empty (" + std::to_string(outH) + " x " +
                             std::to_string(outW) + ") for input shape " + dimsText(inputDims) +
                             " and weight shape " + dimsText(weightDims));
  const std::vector<int64_t> expectedOffset = {p.batch, 2 * p.offsetGroups * taps, outH, outW};
  if (offsetDims != expectedOffset)
    return invalid(node, "offset shape must be " + dimsText(expectedOffset) +
                             " (batch, 2 * offset_groups * kH * kW, outH, outW), got " +
                             dimsText(offsetDims));
  if (maskDims) {
    const std::vector<int64_t> expectedMask = {p.batch, p.offsetGroups * taps, outH, outW};
    if (*maskDims != expectedMask)
      return invalid(node, "mask shape must be " + dimsText(expectedMask) +
                               " (batch, offset_groups * kH * kW, outH, outW), got " +
                               dimsText(*maskDims));
  }
  if (biasDims && *biasDims != std::vector<int64_t>{p.outChannels})
    return invalid(node, "bias shape must be [" + std::to_string(p.outChannels) + "], got " +
                             dimsText(*biasDims));
  return p;
}

int64_t deformConv2dColumnsSize(const DeformConv2dParams& p) {
  return p.inChannels * p.kernelHeight * p.kernelWidth * p.outHeight() * p.outWidth();
}

void deformableIm2col(const DeformConv2dParams& p, const float* image, const float* offset,
                      const float* mask, float* columns) {
  const int64_t outH = p.outHeight(), outW = p.outWidth(), pixels = outH * outW;
  const int64_t taps = p.kernelHeight * p.kernelWidth;
  const int64_t channelsPerOffsetGroup = p.inChannels / p.offsetGroups;
  // One column row per (input channel, kernel tap), in the weight's (c, i, j) order.
  parallelFor(p.inChannels * taps, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t c = row / taps, tap = row % taps;
      const int64_t i = tap / p.kernelWidth, j = tap % p.kernelWidth;
      const int64_t group = c / channelsPerOffsetGroup;
      const float* plane = image + c * p.inHeight * p.inWidth;
      const float* dy = offset + (2 * (group * taps + tap)) * pixels;
      const float* dx = dy + pixels;
      const float* scale = mask ? mask + (group * taps + tap) * pixels : nullptr;
      float* col = columns + row * pixels;
      for (int64_t y = 0; y < outH; ++y) {
        const float baseY = static_cast<float>(y * p.strideH - p.padH + i * p.dilationH);
        for (int64_t x = 0; x < outW; ++x) {
          const int64_t at = y * outW + x;
          const float baseX = static_cast<float>(x * p.strideW - p.padW + j * p.dilationW);
          const float v =
              sampleBilinear(plane, p.inHeight, p.inWidth, baseY + dy[at], baseX + dx[at]);
          col[at] = scale ? scale[at] * v : v;
        }
      }
    }
  });
}

void deformConv2d(const DeformConv2dParams& p, const float* input, const float* weight,
                  const float* offset, const float* mask, const float* bias, float* output,
                  float* columns) {
  const int64_t pixels = p.outHeight() * p.outWidth();
  const int64_t taps = p.kernelHeight * p.kernelWidth;
  const int64_t outPerGroup = p.outChannels / p.groups;
  const int64_t depth = (p.inChannels / p.groups) * taps;  // GEMM K: one group's column rows
  for (int64_t n = 0; n < p.batch; ++n) {
    const float* image = input + n * p.inChannels * p.inHeight * p.inWidth;
    const float* imageMask = mask ? mask + n * p.offsetGroups * taps * pixels : nullptr;
    deformableIm2col(p, image, offset + n * 2 * p.offsetGroups * taps * pixels, imageMask, columns);
    float* out = output + n * p.outChannels * pixels;
    for (int64_t o = 0; o < p.outChannels; ++o)
      std::fill(out + o * pixels, out + (o + 1) * pixels, bias ? bias[o] : 0.0f);
    for (int64_t g = 0; g < p.groups; ++g) {
      multiplyAdd(outPerGroup, pixels, depth, weight + g * outPerGroup * depth,
                  columns + g * depth * pixels, out + g * outPerGroup * pixels);
    }
  }
}

}  // namespace kiln::plugins
