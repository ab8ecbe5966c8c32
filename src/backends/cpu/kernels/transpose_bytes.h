// A matrix transpose of one-byte elements: what the 8-bit layout changes (NCHW <-> NHWC around
// channels-last convolutions) are. copyStrided's element loop reads one byte per strided load;
// this moves 16 x 16 blocks through SSE2 registers.
#pragma once
#include <cstdint>

#include "core/internal_api.h"

namespace kiln::cpu {

/// dst[c * rows + r] = src[r * cols + c] for r < rows, c < cols (dst is [cols][rows]). Splits the
/// columns over the thread pool.
KILN_INTERNAL_API void transposeBytes(const uint8_t* src, int64_t rows, int64_t cols, uint8_t* dst);

}  // namespace kiln::cpu
