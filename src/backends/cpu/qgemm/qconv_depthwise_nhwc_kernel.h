// The AVX512-VNNI halves of qconvDepthwiseNhwc (qconv_depthwise_nhwc_kernel_avx512vnni.cpp).
#pragma once
#include <cstdint>

#include "backends/cpu/qgemm/qconv_depthwise_nhwc.h"

namespace kiln::cpu {

/// Channels a quad row holds per position: p.channels rounded up to 16.
inline int64_t depthwiseNhwcLanes(int64_t channels) { return (channels + 15) / 16 * 16; }

/// Each full block of 32 channels is rewritten with 256-bit unpacks, which work within 128-bit
/// halves: its quads, weights and per-channel terms sit in this lane order (two 16-lane groups:
/// channels 0-3, 16-19, 4-7, 20-23, then 8-11, 24-27, 12-15, 28-31). Channels past the last full
/// block keep their own order.
inline int64_t depthwiseNhwcBlocks(int64_t channels) { return channels / 32; }
inline int64_t depthwiseNhwcLaneOf(int64_t channel, int64_t channels) {
  if (channel >= depthwiseNhwcBlocks(channels) * 32) return channel;
  const int64_t j = channel % 32, quarter = j % 16 / 4;
  return channel - j + quarter / 2 * 16 + quarter % 2 * 8 + j / 16 * 4 + j % 4;
}

/// Input row iy (inside the image) as quads: quads[(ox * lanes + c) * 4 + kx]. zeroRow holds
/// `lanes` bytes of the zero point.
void depthwiseNhwcQuadRowAvx512Vnni(const QConvDepthwiseNhwcProblem& p, int64_t iy,
                                    const uint8_t* zeroRow, uint8_t* quads);

/// Output row y[ox][c] from the kernel rows' quads: rows[ky] + ox * rowSteps[ky] is output ox's
/// quads for kernel row ky (a step of 0 repeats one position: a row in the padding).
void depthwiseNhwcOutputRowAvx512Vnni(const QConvDepthwiseNhwcProblem& p,
                                      const uint8_t* const* rows, const int64_t* rowSteps,
                                      uint8_t* y);

}  // namespace kiln::cpu
