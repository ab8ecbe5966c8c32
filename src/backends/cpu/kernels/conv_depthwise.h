// Depthwise 2-D convolution (one input channel per group, one output channel per group) with
// square K x K kernels, K in {3, 5, 7}, stride 1 or 2, no dilation: the shapes of MobileNet and
// EfficientNet, which im2col + GEMM serves badly (a one-row GEMM per channel).
#pragma once
#include <cstdint>

#include "backends/cpu/activation.h"
#include "backends/cpu/cpu_isa.h"
#include "core/internal_api.h"
#include "ir/ops/conv_geometry.h"

namespace kiln::cpu {

/// Whether depthwiseConv2d handles this geometry (2-D, square kernel 3/5/7, equal strides 1 or 2,
/// dilation 1).
KILN_INTERNAL_API bool depthwiseConv2dSupported(const ir::ConvGeometry& g);

/// y[n, c] = act(conv(x[n, c], w[c]) + bias[c] + residual[n, c]) for all images and channels,
/// split over the current thread pool, on the AVX-512 kernel (conv_depthwise_avx512.cpp) or the
/// AVX2 one as `isa` says (the candidate chosen for the node; the CPU must have it). x is
/// [batch, channels, H, W], w is [channels, 1, K, K], y and residual (may be null) have the
/// output shape; bias may be null.
KILN_INTERNAL_API void depthwiseConv2d(const ir::ConvGeometry& g, int64_t batch, int64_t channels,
                                       int64_t height, int64_t width, const float* x,
                                       const float* w, const float* bias, const float* residual,
                                       const Activation& act, float* y,
                                       CpuIsa isa = activeCpuIsa());

namespace detail {
/// depthwiseConv2d on 16-float vectors; call only when the CPU has AVX-512.
void depthwiseConv2dAvx512(const ir::ConvGeometry& g, int64_t batch, int64_t channels,
                           int64_t height, int64_t width, const float* x, const float* w,
                           const float* bias, const float* residual, const Activation& act,
                           float* y);
}  // namespace detail

}  // namespace kiln::cpu
