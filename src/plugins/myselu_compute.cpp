// y = x * sigmoid(x) on 8-float vectors, split over the current thread pool in blocks.
#include "plugins/myselu_compute.h"

#include <algorithm>

#include "backends/cpu/kernels/softmax_exp.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::plugins {
namespace {

constexpr int64_t kBlock = 16384;  // elements per parallel task: enough work to cover the handoff

// x / (1 + exp(-x)): one division, and vectorExp clamps its argument, so very negative x give a
// tiny y (not 0 * inf = NaN) and very positive x give y = x.
template <typename V>
V silu(V x) {
  return x / (1.0f + cpu::vectorExp(-x));
}

void myseluRange(const float* x, float* y, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) cpu::store8(y + i, silu(cpu::load8(x + i)));
  for (; i < end; ++i) y[i] = silu(x[i]);
}

}  // namespace

void myselu(const float* x, float* y, int64_t count) {
  const int64_t blocks = (count + kBlock - 1) / kBlock;
  cpu::parallelFor(blocks, [&](int64_t b0, int64_t b1) {
    myseluRange(x, y, b0 * kBlock, std::min(count, b1 * kBlock));
  });
}

}  // namespace kiln::plugins
