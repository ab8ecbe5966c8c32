// Activations applied to whole float arrays (the standalone Sigmoid and Swish kernels), with the
// vectorised code of the fused epilogues (activation_simd.h).
#pragma once
#include <cstdint>

#include "backends/cpu/activation.h"
#include "core/internal_api.h"

namespace kiln::cpu {

/// y[i] = act(x[i]) for i in [0, n); y may be x. Picks the AVX-512 code when the CPU has it.
KILN_INTERNAL_API void applyActivation(const Activation& act, const float* x, float* y, int64_t n);

/// applyActivation split in contiguous ranges over the current thread pool when n is large.
void applyActivationInParallel(const Activation& act, const float* x, float* y, int64_t n);

namespace detail {
/// applyActivation on 16-float vectors; call only when the CPU has AVX-512.
void applyActivationAvx512(const Activation& act, const float* x, float* y, int64_t n);
}  // namespace detail

}  // namespace kiln::cpu
