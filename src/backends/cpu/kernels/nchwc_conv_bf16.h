// The BF16 direct NchwcConv kernels, their weight packings and scratch: for a blocked X
// (nchwc_conv_bf16_avx512bf16.cpp, candidate bf16_nchwc_conv_direct_avx512bf16) and for a plain
// NCHW X, the stem (nchwc_conv_plain_bf16_avx512bf16.cpp, bf16_nchwc_conv_plain_input_avx512bf16).
// nchwc_conv.cpp lists them before the FP32 kernels; they take layers marked bf16.
#pragma once
#include <cstdint>

#include "backends/cpu/kernels/nchwc_conv.h"
#include "core/internal_api.h"

namespace kiln::cpu {

/// 32-bit words of the BF16 packing of W [Co, Ci, kH, kW] for a blocked X.
KILN_INTERNAL_API int64_t nchwcBf16WeightWords(int64_t outChannels, int64_t inChannels,
                                               int64_t taps);

/// The BF16 packing from the FP32 one for a blocked X (packNchwcWeights, kBlockedInput): the same
/// layout with each two input channels of a block, rounded to BF16 (nearest even), in one 32-bit
/// lane, the even channel in its low half: [ci / 16][tap][ci % 16 / 2][M][16]. Stored as floats'
/// worth of words (NchwcPackedWeights::floats counts the words).
KILN_INTERNAL_API NchwcPackedWeights packNchwcBf16Weights(const NchwcPackedWeights& blocked,
                                                          int64_t outChannels, int64_t inChannels,
                                                          int64_t taps);

/// Scratch bytes the kernel needs for X of this shape: X rounded to BF16.
KILN_INTERNAL_API uint64_t nchwcConvBf16ScratchBytes(const NchwcConvShape& shape);

/// Plain X: the column pairs of a kernel row (two neighbouring kernel columns per BF16 pair).
inline int64_t nchwcPlainBf16ColumnPairs(int64_t kernelW) { return (kernelW + 1) / 2; }

/// Plain X: the words of one row of X as column pairs, word j holding the horizontally padded
/// row's columns j and j + 1 (zeros outside X), as many as the output row reads.
inline int64_t nchwcPlainBf16PairWidth(const NchwcConvShape& s) {
  return (s.outWidth - 1) * s.strideW + 2 * nchwcPlainBf16ColumnPairs(s.kernelW);
}

/// Plain X: words of the packing of W [Co, Ci, kH, kW]: each group of M output blocks
/// [ky][column pair][ci][M][16], the pair's even column in the low half (an odd kW's last pair
/// has a zero high half).
KILN_INTERNAL_API int64_t nchwcPlainBf16WeightWords(int64_t outChannels, int64_t inChannels,
                                                    int64_t kernelH, int64_t kernelW);
KILN_INTERNAL_API NchwcPackedWeights packNchwcPlainBf16Weights(const float* w, int64_t outChannels,
                                                               int64_t inChannels, int64_t kernelH,
                                                               int64_t kernelW);

/// Plain X: scratch bytes the kernel needs for X of this shape (X as column pairs).
KILN_INTERNAL_API uint64_t nchwcPlainConvBf16ScratchBytes(const NchwcConvShape& shape);

namespace detail {
/// y = act(conv(x, weights) + bias + residual) for a blocked X, group 1, with `weights` from
/// packNchwcBf16Weights and `xPairs` scratch of nchwcConvBf16ScratchBytes; the CPU must have
/// AVX512_BF16. a.weights is not read.
KILN_INTERNAL_API void nchwcConvBf16Avx512(const NchwcConvArgs& a, const uint32_t* weights,
                                           uint32_t* xPairs);
/// The same for a plain X [N, Ci, H, W] (shape.plainInput), dilationW 1 and strideW 1 or 2, with
/// `weights` from packNchwcPlainBf16Weights and `pairs` scratch of nchwcPlainConvBf16ScratchBytes.
KILN_INTERNAL_API void nchwcPlainConvBf16Avx512(const NchwcConvArgs& a, const uint32_t* weights,
                                                uint32_t* pairs);
}  // namespace detail

}  // namespace kiln::cpu
