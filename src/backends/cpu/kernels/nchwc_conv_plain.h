// The AVX-512 NchwcConv kernel for a plain NCHW X (the first convolution of a CNN, on an RGB
// image): nchwc_conv_plain_avx512.cpp. It reads X where it lies, with no padded copy, and takes
// every shape a plain-X NchwcConv can have (nchwc_conv.h), so nchwcConv calls it for all of them
// on AVX-512 CPUs.
#pragma once
#include "backends/cpu/kernels/nchwc_conv.h"

namespace kiln::cpu::detail {

/// y = act(conv(x, weights) + bias + residual) for args.shape->plainInput, weights packed as
/// NchwcWeightLayout::kPlainInput; runs over the current thread pool. Call nchwcConv instead.
void nchwcPlainConvAvx512(const NchwcConvArgs& args);

}  // namespace kiln::cpu::detail
