// The driver of the NHWC depthwise convolution (qconv_depthwise_nhwc.h). Threads take ranges of
// output rows; each keeps the quad rows of the last (kh - 1) * dh + 1 input rows in a ring, so an
// input row is rewritten once however many output rows read it (three at stride 1).
#include "backends/cpu/qgemm/qconv_depthwise_nhwc.h"

#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/qgemm/qconv_depthwise_nhwc_kernel.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

uint64_t roundUp64(uint64_t n) { return (n + 63) / 64 * 64; }

// Input rows one output row reads span this many rows: distinct slots modulo it.
int64_t ringRows(const QConvDepthwiseNhwcProblem& p) { return (p.kh - 1) * p.dh + 1; }

uint64_t quadRowBytes(const QConvDepthwiseNhwcProblem& p) {
  return roundUp64(static_cast<uint64_t>(p.ow * depthwiseNhwcLanes(p.channels) * 4));
}

// Per thread: a row of zero points, one position of zero-point quads, the ring.
uint64_t threadBytes(const QConvDepthwiseNhwcProblem& p) {
  const uint64_t lanes = static_cast<uint64_t>(depthwiseNhwcLanes(p.channels));
  return roundUp64(lanes) + roundUp64(lanes * 4) +
         static_cast<uint64_t>(ringRows(p)) * quadRowBytes(p);
}

}  // namespace

std::vector<int8_t> packDepthwiseNhwcWeights(const int8_t* w, int64_t channels, int64_t kh,
                                             int64_t kw) {
  const int64_t lanes = depthwiseNhwcLanes(channels);
  std::vector<int8_t> packed(static_cast<size_t>(kh * lanes * 4), 0);
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t ky = 0; ky < kh; ++ky)
      for (int64_t kx = 0; kx < kw; ++kx)
        packed[static_cast<size_t>((ky * lanes + depthwiseNhwcLaneOf(c, channels)) * 4 + kx)] =
            w[(c * kh + ky) * kw + kx];
  return packed;
}

bool qconvDepthwiseNhwcAvailable() { return cpuHas(CpuIsa::kAvx512Vnni); }

uint64_t qconvDepthwiseNhwcWorkspaceBytes(const QConvDepthwiseNhwcProblem& p, int threads) {
  return static_cast<uint64_t>(std::max(threads, 1)) * threadBytes(p);
}

void qconvDepthwiseNhwc(const QConvDepthwiseNhwcProblem& p, void* workspace) {
  if (p.oh <= 0 || p.ow <= 0 || p.channels <= 0) return;
  const int64_t lanes = depthwiseNhwcLanes(p.channels), ring = ringRows(p);
  const uint64_t perThread = threadBytes(p), rowBytes = quadRowBytes(p);
  uint8_t* ws = static_cast<uint8_t*>(workspace);
  forEachThreadPart(p.oh, poolThreads(), [&](int64_t part, int64_t oy0, int64_t oy1) {
    uint8_t* zeroRow = ws + static_cast<uint64_t>(part) * perThread;
    uint8_t* zeroQuads = zeroRow + roundUp64(static_cast<uint64_t>(lanes));
    uint8_t* slots = zeroQuads + roundUp64(static_cast<uint64_t>(lanes * 4));
    std::memset(zeroRow, p.xZero, static_cast<size_t>(lanes));
    std::memset(zeroQuads, p.xZero, static_cast<size_t>(lanes * 4));
    std::vector<int64_t> slotRow(static_cast<size_t>(ring), -1);  // the input row each holds
    std::vector<const uint8_t*> rows(static_cast<size_t>(p.kh));
    std::vector<int64_t> steps(static_cast<size_t>(p.kh));
    for (int64_t oy = oy0; oy < oy1; ++oy) {
      for (int64_t ky = 0; ky < p.kh; ++ky) {
        const int64_t iy = oy * p.sh - p.padTop + ky * p.dh;
        const size_t k = static_cast<size_t>(ky);
        if (iy < 0 || iy >= p.ih) {
          rows[k] = zeroQuads, steps[k] = 0;
          continue;
        }
        const size_t slot = static_cast<size_t>(iy % ring);
        uint8_t* quads = slots + slot * rowBytes;
        if (slotRow[slot] != iy) {
          depthwiseNhwcQuadRowAvx512Vnni(p, iy, zeroRow, quads);
          slotRow[slot] = iy;
        }
        rows[k] = quads, steps[k] = lanes * 4;
      }
      depthwiseNhwcOutputRowAvx512Vnni(p, rows.data(), steps.data(), p.y + oy * p.ow * p.channels);
    }
  });
}

}  // namespace kiln::cpu
