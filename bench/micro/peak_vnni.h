// Kernels of independent vpdpbusd chains that run at the core's peak int8 multiply-accumulate
// rate: the denominator of the int8 GEMM's "share of peak".
#pragma once
#include <cstdint>

namespace kiln::bench {

constexpr int64_t kVnniChains = 24;

/// `iterations` steps of 24 independent zmm vpdpbusd chains (call only on AVX512-VNNI CPUs);
/// returns a value that depends on every chain. Ops = iterations * 24 * 64 * 2.
int32_t vnniChainsAvx512(int64_t iterations);

}  // namespace kiln::bench
