// onnxruntime's blocked channel layout (domain com.microsoft.nchwc, opset 1), as its saved
// ORT_ENABLE_ALL models use it. A blocked tensor keeps ONNX's 4-D shape [N, Cp, H, W], Cp the
// channel count rounded up to the block size B, but its memory holds [N, Cp / B, H, W, B]: the B
// channels of one pixel are contiguous. B is the CPU's, not the file's: onnxruntime takes 16 on
// a CPU with AVX-512F and 8 on one with AVX2 only (MlasNchwcGetBlockSize), reorders the Conv
// filters for it when it saves the file, and does not record it. kiln follows the same rule, so
// a file runs here when it was saved on a CPU of the same vector width (docs/operators.md).
//
// Ops (shape rules in contrib_nchwc.cpp, CPU kernels in backends/cpu/kernels/contrib_nchwc*.cpp):
//   ReorderInput(X [N, C, H, W], or [N, H, W, C] with channels_last) -> blocked [N, Cp, H, W];
//     padding channels are zero.
//   ReorderOutput(blocked X [N, Cp, H, W]) -> [N, channels, H, W] ([N, H, W, channels] with
//     channels_last); Cp - B < channels <= Cp.
//   Conv(X, W, B?, Sum?) -> blocked Y [N, Co, Ho, Wo] = act(Conv(X, W) + B + Sum): Conv's
//     attributes (2-D) and activation / activation_params (Relu, LeakyRelu, Tanh, Sigmoid, Clip,
//     HardSigmoid). W is [Co, Ci / group, kH, kW] with Co a multiple of B, its values reordered:
//       OIHWBo  (X plain NCHW with Ci < B, group 1; or depthwise, Ci / group == 1, group == Co):
//               W[o, i, k] at ((o / B) * (Ci / group) + i) * kH * kW + k) * B + o % B.
//       OIHWBiBo (X blocked, Ci / group a multiple of B): W[o, i, k] at
//               (((o / B) * (Ci / group / B) + i / B) * kH * kW + k) * B + i % B) * B + o % B.
//   MaxPool, AveragePool (count_include_pad): the ONNX pools' 2-D windows on blocked X.
//   GlobalMaxPool, GlobalAveragePool: blocked [N, Cp, H, W] -> [N, Cp, 1, 1].
//   Upsample(X) -> blocked [N, Cp, H * scales[2], W * scales[3]]: integer scales (scales[0] and
//     scales[1] are 1), mode nearest or linear, coordinate_transformation_mode asymmetric,
//     align_corners or half_pixel (linear only).
// Per-element ai.onnx ops between them (Add, Sum, Mul, Relu, ...) see blocked tensors of equal
// shapes, so they compute the same whatever the layout; Concat on axis 1 joins inputs whose
// channel counts are multiples of B, which is a concatenation of blocks.
#pragma once
#include <cstdint>

#include "core/internal_api.h"

namespace kiln::ir {

/// The block size onnxruntime uses on this CPU: 16 with AVX-512F, else 8. Tests force the other
/// one with the environment variable KILN_ORT_NCHWC_BLOCK=8 or 16 (read on every call).
KILN_INTERNAL_API int64_t ortNchwcBlockSize();

/// `channels` rounded up to a multiple of `block`.
constexpr int64_t roundUpToBlock(int64_t channels, int64_t block) {
  return (channels + block - 1) / block * block;
}

}  // namespace kiln::ir
