// Direct 8-bit 2-D convolution on channels-last (NHWC) images, with AVX512-VNNI: no im2col and no
// per-call packing. C[pixels x out channels] = X x W where row p of X is read straight from the
// image through an indirection table (for each output pixel and tap, the address of the input
// pixel's channels, or of a row of zero points where the tap falls in the padding), and W is the
// packed right operand of the 8x32 micro-kernel (qgemm_kernels.h) with K ordered tap-major,
// channel-minor. The output is NHWC as well: each 8 x 32 tile is 8 pixels' 32 channels.
//
// Zero points: the weights' must be 0 (symmetric s8, or u8 stored -128 with zero point 128),
// so C = sum (x - zX) w = sum x w - zX sW with sW the weights' column sums: the caller folds
// bias - zX sW into one term per output channel. A padded tap reads zX, adding (zX - zX) w = 0.
#pragma once
#include <cstdint>

#include "backends/cpu/qgemm/qgemm.h"
#include "core/internal_api.h"

namespace kiln::cpu {

struct QConvNhwcProblem {
  const uint8_t* x = nullptr;            // one image [ih, iw, channels], u8
  int64_t ih = 0, iw = 0, channels = 0;  // channels a multiple of 4
  int64_t oh = 0, ow = 0, kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, padTop = 0, padLeft = 0;
  uint8_t xZero = 0;                       // X's zero point, the value of a padded tap
  const PackedQMatrix* weights = nullptr;  // kRight, outer = out channels, depth = kh*kw*channels
  const int32_t* channelAdd = nullptr;     // per out channel: bias - zX * sW (int32, wrapping)
  QGemmOutput output;                      // per-channel scales are per column
  void* y = nullptr;                       // [oh, ow, out channels] of output.dtype
};

/// Whether this CPU and these weights can take the direct kernel (AVX512-VNNI, right side).
KILN_INTERNAL_API bool qconvNhwcAvailable();

/// The side, ISA and depth to pack W with: packQWeights(kRight, kAvx512Vnni, outChannels,
/// qconvNhwcDepth(...), W laid out [out channel][tap][channel]).
inline int64_t qconvNhwcDepth(int64_t taps, int64_t channels) { return taps * channels; }

/// Scratch bytes for one call on `threads` threads.
KILN_INTERNAL_API uint64_t qconvNhwcWorkspaceBytes(int64_t taps, int64_t channels, int threads);

/// Runs one image on the current thread pool; `workspace` holds qconvNhwcWorkspaceBytes bytes
/// for the pool's size (64-byte aligned).
KILN_INTERNAL_API void qconvNhwc(const QConvNhwcProblem& p, void* workspace);

}  // namespace kiln::cpu
