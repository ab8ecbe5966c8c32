// y = x * sigmoid(x), split over the context's threads in blocks (kiln::parallelFor).
#include "plugins/myselu_compute.h"

#include <algorithm>
#include <cmath>

#include "kiln/plugin.h"

namespace kiln::plugins {
namespace {

constexpr int64_t kBlock = 16384;  // elements per parallel task: enough work to cover the handoff

// x / (1 + exp(-x)): one division, so very negative x give -0 (x / inf, not 0 * inf = NaN) and
// very positive x give y = x.
float silu(float x) { return x / (1.0f + std::exp(-x)); }

void myseluRange(const float* x, float* y, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) y[i] = silu(x[i]);
}

}  // namespace

void myselu(const float* x, float* y, int64_t count) {
  const int64_t blocks = (count + kBlock - 1) / kBlock;
  parallelFor(blocks, [&](int64_t b0, int64_t b1) {
    myseluRange(x, y, b0 * kBlock, std::min(count, b1 * kBlock));
  });
}

}  // namespace kiln::plugins
