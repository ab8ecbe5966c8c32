// The BF16 direct NchwcConv (nchwc_conv_bf16_avx512bf16.cpp): its weight packing and kernel.
// The candidate bf16_nchwc_conv_direct_avx512bf16 (nchwc_conv.cpp) takes layers marked bf16 with
// a blocked X, before the FP32 Winograd and direct ones.
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

namespace detail {
/// y = act(conv(x, weights) + bias + residual) for a blocked X, group 1, with `weights` from
/// packNchwcBf16Weights and `xPairs` scratch of nchwcConvBf16ScratchBytes; the CPU must have
/// AVX512_BF16. a.weights is not read.
KILN_INTERNAL_API void nchwcConvBf16Avx512(const NchwcConvArgs& a, const uint32_t* weights,
                                           uint32_t* xPairs);
}  // namespace detail

}  // namespace kiln::cpu
