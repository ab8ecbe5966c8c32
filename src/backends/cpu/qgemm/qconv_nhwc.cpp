// The driver of the direct NHWC convolution (qconv_nhwc.h). Work is cut into chunks of output-
// channel strips whose packed weights fit half of L2 and, across them, runs of 8-pixel row blocks;
// a thread builds a row block's indirection table once and runs it against every strip of its
// chunk, so the chunk's weights stay in L2 while the pixels stream through L1.
#include "backends/cpu/qgemm/qconv_nhwc.h"

#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_caches.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/qgemm/qconv_nhwc_kernel.h"
#include "backends/cpu/qgemm/qgemm_epilogue.h"
#include "backends/cpu/qgemm/qgemm_pack.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kRows = kQConvNhwcRows, kCols = kQConvNhwcCols;

uint64_t roundUp64(uint64_t n) { return (n + 63) / 64 * 64; }

// Per thread: the row block's table (kRows addresses per tap).
uint64_t slotBytes(int64_t taps) {
  return roundUp64(static_cast<uint64_t>(taps * kRows) * sizeof(const uint8_t*));
}

// The addresses of the input pixels that rows [p0, p0 + rows) read at each tap, tap-major:
// table[t * kRows + i]; taps in the padding, and rows past `rows`, read the zero-point row.
void fillTable(const QConvNhwcProblem& p, int64_t p0, int64_t rows, const uint8_t* zeroRow,
               const uint8_t** table) {
  // One division per block: small-K layers spend a tile's worth of cycles on eight.
  int64_t oy = p0 / p.ow, ox = p0 % p.ow;
  for (int64_t i = 0; i < kRows; ++i, ox = ox + 1 == p.ow ? (++oy, 0) : ox + 1) {
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      const int64_t iy = oy * p.sh - p.padTop + ky * p.dh;
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        const int64_t ix = ox * p.sw - p.padLeft + kx * p.dw;
        const bool inside = i < rows && iy >= 0 && iy < p.ih && ix >= 0 && ix < p.iw;
        table[(ky * p.kw + kx) * kRows + i] =
            inside ? p.x + (iy * p.iw + ix) * p.channels : zeroRow;
      }
    }
  }
}

}  // namespace

bool qconvNhwcAvailable() { return cpuHas(CpuIsa::kAvx512Vnni); }

uint64_t qconvNhwcWorkspaceBytes(int64_t taps, int64_t channels, int threads) {
  return roundUp64(static_cast<uint64_t>(channels)) +
         static_cast<uint64_t>(std::max(threads, 1)) * slotBytes(taps);
}

void qconvNhwc(const QConvNhwcProblem& p, void* workspace) {
  const int64_t pixels = p.oh * p.ow, outChannels = p.weights->outer();
  if (pixels <= 0 || outChannels <= 0) return;
  const int64_t taps = p.kh * p.kw, cGroups = p.channels / 4;
  const int64_t stripBytes = qStripBytes(p.weights->depth(), kCols);
  const int64_t strips = qStrips(outChannels, kCols), rowBlocks = qStrips(pixels, kRows);
  const int64_t chunkStrips =
      std::clamp<int64_t>(cpuCacheSizes().l2Bytes / 2 / stripBytes, 1, strips);
  const int64_t chunks = qStrips(strips, chunkStrips);
  const int threads = poolThreads();
  // Row runs: enough items for every thread to get several, none shorter than one block.
  const int64_t runs = std::clamp<int64_t>((4 * threads + chunks - 1) / chunks, 1, rowBlocks);
  uint8_t* ws = static_cast<uint8_t*>(workspace);
  uint8_t* zeroRow = ws;
  std::memset(zeroRow, p.xZero, static_cast<size_t>(p.channels));
  const uint8_t* weights = reinterpret_cast<const uint8_t*>(p.weights->data());
  const size_t elem =
      p.output.dtype == DataType::kUint8 || p.output.dtype == DataType::kInt8 ? 1 : 4;
  const bool quantized = p.output.dtype == DataType::kUint8 || p.output.dtype == DataType::kInt8;
  const uint64_t slot = slotBytes(taps);
  uint8_t* slots = ws + roundUp64(static_cast<uint64_t>(p.channels));
  forEachThreadPart(chunks * runs, threads, [&](int64_t part, int64_t begin, int64_t end) {
    auto** table = reinterpret_cast<const uint8_t**>(slots + static_cast<uint64_t>(part) * slot);
    alignas(64) int32_t tile[kRows * kCols];
    for (int64_t item = begin; item < end; ++item) {
      const int64_t chunk = item / runs, run = item % runs;
      const int64_t s0 = chunk * chunkStrips, s1 = std::min(strips, s0 + chunkStrips);
      const int64_t b0 = run * rowBlocks / runs, b1 = (run + 1) * rowBlocks / runs;
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t p0 = b * kRows, rows = std::min(kRows, pixels - p0);
        fillTable(p, p0, rows, zeroRow, table);
        for (int64_t s = s0; s < s1; ++s) {
          const int64_t c0 = s * kCols, cols = std::min(kCols, outChannels - c0);
          const uint8_t* w = weights + s * stripBytes;
          if (quantized) {
            QConvNhwcRequant out;
            out.add = p.channelAdd + c0;
            out.perColumn = p.output.scaleCount > 1;
            out.scale = p.output.scale + (out.perColumn ? c0 : 0);
            out.lo = static_cast<float>(p.output.lowest - p.output.zeroPoint);
            out.hi = static_cast<float>(p.output.highest - p.output.zeroPoint);
            out.zeroPoint = p.output.zeroPoint;
            out.y = static_cast<uint8_t*>(p.y) + p0 * outChannels + c0;
            out.ldy = outChannels;
            out.cols = cols;
            qconvNhwcTileRequantAvx512Vnni(taps, cGroups, table, w, rows, out);
            continue;
          }
          qconvNhwcTileAvx512Vnni(taps, cGroups, table, w, tile, rows, cols);
          QTileTerms terms;
          terms.colAdd = p.channelAdd + c0;
          void* c = static_cast<uint8_t*>(p.y) + (p0 * outChannels + c0) * elem;
          finishQTileAvx512(tile, kCols, rows, cols, terms, p.output, false, c0, c, outChannels);
        }
      }
    }
  });
}

}  // namespace kiln::cpu
