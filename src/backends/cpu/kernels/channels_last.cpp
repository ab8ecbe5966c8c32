#include "backends/cpu/kernels/channels_last.h"

#include <algorithm>

#include "backends/cpu/kernels/copy_util.h"

namespace kiln::cpu {
namespace {

// dst[i][q][p] = src[i][p][q] for an [n, a, b] tensor.
Tensor swapInnerAxes(const Tensor& x, const Shape& shape, int64_t a, int64_t b) {
  Tensor y(x.dtype(), shape);
  const int64_t n = a * b == 0 ? 0 : x.numel() / (a * b);
  dispatchStorage(x.dtype(), "channels-last move", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = static_cast<const T*>(x.raw());
    T* dst = static_cast<T*>(y.raw());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < a; ++p)
        for (int64_t q = 0; q < b; ++q) dst[(i * b + q) * a + p] = src[(i * a + p) * b + q];
  });
  return y;
}

}  // namespace

Shape channelsLastShape(const Shape& s) {
  Shape out(s);
  if (out.size() < 2) return out;
  std::rotate(out.begin() + 1, out.begin() + 2, out.end());
  return out;
}

Shape channelsFirstShape(const Shape& s) {
  Shape out(s);
  if (out.size() < 2) return out;
  std::rotate(out.begin() + 1, out.end() - 1, out.end());
  return out;
}

Tensor toChannelsLast(const Tensor& x) {
  const Shape& s = x.shape();
  const int64_t channels = s[1];
  const int64_t spatial = channels == 0 || s[0] == 0 ? 0 : x.numel() / (s[0] * channels);
  return swapInnerAxes(x, channelsLastShape(s), channels, spatial);
}

Tensor toChannelsFirst(const Tensor& x) {
  const Shape& s = x.shape();
  const int64_t channels = s.back();
  const int64_t spatial = channels == 0 || s[0] == 0 ? 0 : x.numel() / (s[0] * channels);
  return swapInnerAxes(x, channelsFirstShape(s), spatial, channels);
}

}  // namespace kiln::cpu
