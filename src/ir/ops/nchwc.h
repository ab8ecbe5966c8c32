// The blocked channel layout ("NCHWc") that kiln's builder carries across consecutive convolutions
// on CPUs with wide vectors (see src/opt/nchwc_layout.cpp, docs/design.md).
//
// A blocked tensor is an ordinary float32 tensor of shape [N, ceil(C / 16), H, W, 16]: channel c of
// the logical NCHW tensor lives at [n, c / 16, h, w, c % 16], so the 16 channels of one pixel are
// one AVX-512 vector (two AVX2 vectors). Values in the padding channels (c >= C in the last block)
// are unspecified: consumers that combine channels (convolutions, ReorderFromNchwc) never read
// them, and per-element ops (Relu, Add, Mul, ...) may compute anything there. Operations that move
// channels between blocks (Concat on channels, Reshape) are only applied where no padding channel
// ends up inside the result (Concat: every input but the last has C % 16 == 0).
//
// Ops (domain "kiln", opset 1):
//   ReorderToNchwc(X [N, C, H, W]) -> Y [N, ceil(C/16), H, W, 16]; padding channels are zero.
//   ReorderFromNchwc(X [N, Cb, H, W, 16]) -> Y [N, C, H, W], attribute "channels" = C, with
//     ceil(C / 16) == Cb.
//   NchwcConv(X, W, [B], [Z]) -> Y = act(Conv(X, W, B) + Z): Conv's attributes (2-D only) and
//     FusedConv's "activation" / "activation_params". X is blocked [N, ceil(Ci/16), H, W, 16], or a
//     plain NCHW [N, Ci, H, W] (the network's image input, few channels); W is Conv's
//     [Co, Ci / group, kH, kW] (a constant: the kernel re-packs it when it is made); group is 1,
//     Ci == Co == group (depthwise, X blocked), or groups that split into slices of whole blocks
//     (8 or a multiple of 16 channels per group, X blocked: nchwc_groups.h); B is [Co]; Y and Z
//     are blocked [N, ceil(Co/16), Ho, Wo, 16].
//   NchwcConv(X, W, [B], [Z], [S]) with the optional X scale S: Y = act(Conv(X * S, W, B) + Z), S a
//     per-input-channel scale, blocked [N or 1, ceil(Ci/16), 1, 1, 16] (group 1, X blocked). The
//     kernel multiplies its packed weights by S per image instead of scaling X, which pays where
//     Co * Ci * kH * kW is well below H * W * Ci: a squeeze-excitation Mul feeding a 1x1
//     projection on a large map (src/opt/fold_se_scale.cpp).
//   NchwcMaxPool(X) -> Y, NchwcAveragePool(X) -> Y: MaxPool's / AveragePool's attributes (2-D
//     window over H and W, no Indices output) on blocked X [N, Cb, H, W, 16] -> Y [N, Cb, Ho, Wo,
//     16].
//   NchwcGlobalAveragePool(X) -> Y, NchwcGlobalMaxPool(X) -> Y: blocked X [N, Cb, H, W, 16] ->
//     Y [N, Cb, 1, 1, 16], the mean / max over H and W.
//
// Ops from ai.onnx that also run on blocked tensors (src/opt/nchwc_layout.cpp): per-element
// unary ops, binary ops whose operands are blocked tensors of the same channel count,
// broadcast over N, H, W only, or one-element tensors, and Concat on axis 1 when every input but
// the last has C % 16 == 0.
#pragma once
#include <cstdint>

namespace kiln::ir {

constexpr int64_t kNchwcBlock = 16;

/// How many blocks hold `channels` channels.
constexpr int64_t nchwcBlocks(int64_t channels) {
  return (channels + kNchwcBlock - 1) / kNchwcBlock;
}

}  // namespace kiln::ir
