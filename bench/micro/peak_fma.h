// Kernels of independent FMA (and BF16 dot-product) chains that run at the core's peak rate.
#pragma once
#include <cstdint>

namespace kiln::bench {

/// Runs `iterations` steps of 24 independent 8-float FMA chains (AVX2); returns a value that
/// depends on every chain. FLOPs = iterations * 24 * 8 * 2.
float fmaChainsAvx2(int64_t iterations);
/// The same with 16-float zmm chains (call only on AVX-512 CPUs). FLOPs = iterations * 24 * 16 * 2.
float fmaChainsAvx512(int64_t iterations);

/// The same with vdpbf16ps (call only on AVX512_BF16 CPUs): 32 multiply-adds per instruction.
/// FLOPs = iterations * 24 * 32 * 2.
float dpbf16ChainsAvx512(int64_t iterations);

constexpr int64_t kFmaChains = 24;

}  // namespace kiln::bench
