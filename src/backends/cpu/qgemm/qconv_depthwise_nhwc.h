// Direct 8-bit depthwise 2-D convolution on channels-last (NHWC) images with AVX512-VNNI, for
// kernels up to four taps wide (MobileNet's 3x3). One `vpdpbusd` lane sums four u8 x s8 products:
// here the four horizontal taps of one channel. Each input row the outputs read is rewritten once
// as "quads", quad[ox][c] = the 4 bytes x[iy][ox * sw - padLeft + kx * dw][c] for kx < 4 (the zero
// point in the padding and past the kernel's width, where the weight is 0), so an output's sixteen
// channels take one `vpdpbusd` per kernel row; the sums are requantized in registers.
//
// Zero points: the weights' are subtracted when they are packed (each w - zW must fit int8), so
// C = sum (x - zX)(w - zW) = sum x (w - zW) - zX sW with sW the shifted weights' sum per channel;
// the caller folds bias - zX sW into one term per channel. A padded tap reads zX.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cpu/qgemm/qgemm.h"
#include "core/internal_api.h"

namespace kiln::cpu {

/// The widest kernel the quads hold.
constexpr int64_t kDepthwiseNhwcMaxWidth = 4;

struct QConvDepthwiseNhwcProblem {
  const uint8_t* x = nullptr;  // one image [ih, iw, channels], u8
  int64_t ih = 0, iw = 0, channels = 0;
  int64_t oh = 0, ow = 0, kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, padTop = 0, padLeft = 0;
  uint8_t xZero = 0;
  const int8_t* weights = nullptr;      // packDepthwiseNhwcWeights' layout
  const int32_t* channelAdd = nullptr;  // per channel: bias - zX * sW (int32, wrapping)
  QGemmOutput output;                   // kUint8 or kInt8; per-channel scales per channel
  uint8_t* y = nullptr;                 // [oh, ow, channels]
};

/// W's values minus their zero points, [channels][kh][kw] in int8, as the kernel reads them:
/// [kh][channels rounded up to 16][4], zeros past kw and past the last channel.
KILN_INTERNAL_API std::vector<int8_t> packDepthwiseNhwcWeights(const int8_t* w, int64_t channels,
                                                               int64_t kh, int64_t kw);

/// Whether this CPU has the instructions (AVX512-VNNI).
KILN_INTERNAL_API bool qconvDepthwiseNhwcAvailable();

/// Scratch bytes for one call on `threads` threads (the geometry's fields of p only).
KILN_INTERNAL_API uint64_t qconvDepthwiseNhwcWorkspaceBytes(const QConvDepthwiseNhwcProblem& p,
                                                            int threads);

/// Runs one image on the current thread pool; `workspace` holds qconvDepthwiseNhwcWorkspaceBytes
/// bytes for the pool's size (64-byte aligned).
KILN_INTERNAL_API void qconvDepthwiseNhwc(const QConvDepthwiseNhwcProblem& p, void* workspace);

}  // namespace kiln::cpu
