// PyTorch-exact bicubic resize of NCHW float planes: per-axis tap plans, then a 4x4 gather per
// output.
#include "plugins/bicubic_resize_compute.h"

#include <algorithm>
#include <cmath>

#include "kiln/plugin.h"

namespace kiln::plugins {
namespace {

constexpr double kCubicA = -0.75;

// Keys' cubic convolution kernel, for |x| <= 1 and for 1 < |x| < 2.
double cubicNear(double x) { return ((kCubicA + 2.0) * x - (kCubicA + 3.0)) * x * x + 1.0; }
double cubicFar(double x) {
  return ((kCubicA * x - 5.0 * kCubicA) * x + 8.0 * kCubicA) * x - 4.0 * kCubicA;
}

}  // namespace

BicubicAxisPlan planBicubicAxis(int64_t inLen, int64_t outLen, bool alignCorners) {
  // PyTorch's area_pixel_compute_scale and area_pixel_compute_source_index (cubic: no clamp at
  // 0). PyTorch divides the sizes in float but computes the source coordinate in double (its CPU
  // accumulate type); matching both matters: at 256 -> 768 a float coordinate alone is off by
  // up to 5e-5 in the output.
  float scale;
  if (alignCorners) {
    scale = outLen > 1 ? static_cast<float>(inLen - 1) / static_cast<float>(outLen - 1) : 0.0f;
  } else {
    scale = static_cast<float>(inLen) / static_cast<float>(outLen);
  }
  BicubicAxisPlan plan;
  plan.index.resize(static_cast<size_t>(outLen));
  plan.weight.resize(static_cast<size_t>(outLen));
  for (int64_t d = 0; d < outLen; ++d) {
    const double dst = static_cast<double>(d);
    const double src = alignCorners ? scale * dst : scale * (dst + 0.5) - 0.5;
    const double floorSrc = std::floor(src);
    const double t = src - floorSrc;
    const int64_t first = static_cast<int64_t>(floorSrc) - 1;
    for (int64_t k = 0; k < 4; ++k) plan.index[d][k] = std::clamp<int64_t>(first + k, 0, inLen - 1);
    plan.weight[d] = {static_cast<float>(cubicFar(t + 1.0)), static_cast<float>(cubicNear(t)),
                      static_cast<float>(cubicNear(1.0 - t)),
                      static_cast<float>(cubicFar(2.0 - t))};
  }
  return plan;
}

void bicubicResize(const float* input, float* output, int64_t planes, int64_t inH, int64_t inW,
                   const BicubicAxisPlan& rows, const BicubicAxisPlan& cols) {
  const int64_t outH = static_cast<int64_t>(rows.index.size());
  const int64_t outW = static_cast<int64_t>(cols.index.size());
  parallelFor(planes * outH, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t plane = r / outH, y = r % outH;
      const float* src = input + plane * inH * inW;
      const float* srcRows[4];
      for (int k = 0; k < 4; ++k) srcRows[k] = src + rows.index[y][k] * inW;
      const std::array<float, 4>& wy = rows.weight[y];
      float* dst = output + r * outW;
      for (int64_t x = 0; x < outW; ++x) {
        const std::array<int64_t, 4>& ix = cols.index[x];
        const std::array<float, 4>& wx = cols.weight[x];
        float sum = 0.0f;
        for (int k = 0; k < 4; ++k) {
          const float* s = srcRows[k];
          const float horizontal =
              wx[0] * s[ix[0]] + wx[1] * s[ix[1]] + wx[2] * s[ix[2]] + wx[3] * s[ix[3]];
          sum += wy[k] * horizontal;
        }
        dst[x] = sum;
      }
    }
  });
}

void bicubicResize(const float* input, float* output, int64_t planes, int64_t inH, int64_t inW,
                   int64_t outH, int64_t outW, bool alignCorners) {
  const BicubicAxisPlan rows = planBicubicAxis(inH, outH, alignCorners);
  const BicubicAxisPlan cols = planBicubicAxis(inW, outW, alignCorners);
  bicubicResize(input, output, planes, inH, inW, rows, cols);
}

}  // namespace kiln::plugins
