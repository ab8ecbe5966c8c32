// Conversions between NCHW test data and the blocked NCHWc layout (ir/ops/nchwc.h), for the
// tests of the blocked kernels: padding channels are filled with NaN, so a kernel that lets
// them leak into real outputs fails.
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

namespace kiln::testing {

constexpr int64_t kNchwcTestBlock = 16;

/// NCHW [n, c, plane] -> blocked [n, ceil(c / 16), plane, 16], padding channels NaN.
inline std::vector<float> toBlocked(const std::vector<float>& x, int64_t n, int64_t c,
                                    int64_t plane) {
  constexpr int64_t kB = kNchwcTestBlock;
  const int64_t blocks = (c + kB - 1) / kB;
  std::vector<float> y(static_cast<size_t>(n * blocks * plane * kB),
                       std::numeric_limits<float>::quiet_NaN());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < plane; ++p)
        y[((i * blocks + ch / kB) * plane + p) * kB + ch % kB] = x[(i * c + ch) * plane + p];
  return y;
}

/// Blocked [n, ceil(c / 16), plane, 16] -> NCHW [n, c, plane] (padding channels dropped).
inline std::vector<float> fromBlocked(const std::vector<float>& y, int64_t n, int64_t c,
                                      int64_t plane) {
  constexpr int64_t kB = kNchwcTestBlock;
  const int64_t blocks = (c + kB - 1) / kB;
  std::vector<float> x(static_cast<size_t>(n * c * plane));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < plane; ++p)
        x[(i * c + ch) * plane + p] = y[((i * blocks + ch / kB) * plane + p) * kB + ch % kB];
  return x;
}

}  // namespace kiln::testing
