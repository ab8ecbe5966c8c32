// The rotation of RotaryEmbedding (rotary_embedding.cpp), shared with the attention ops that
// rotate their queries and keys themselves (com.microsoft GroupQueryAttention).
#pragma once
#include <cstdint>

#include "backends/cpu/kernels/elementwise_util.h"

namespace kiln::cpu {

/// Rotates the first 2 * half features of one head x into y (x == y allowed) by the angles whose
/// cos / sin rows (half values each) are given: pairs (x1, x2), the two halves or (interleaved)
/// even / odd features, become (cos x1 - sin x2, sin x1 + cos x2). The other features are not
/// touched.
template <typename T>
inline void rotateHead(const T* x, T* y, int64_t half, bool interleaved, const T* cosRow,
                       const T* sinRow) {
  using C = ComputeType<T>;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
    const C x1 = static_cast<C>(x[i1]), x2 = static_cast<C>(x[i2]);
    const C c = static_cast<C>(cosRow[i]), sn = static_cast<C>(sinRow[i]);
    y[i1] = static_cast<T>(c * x1 - sn * x2);
    y[i2] = static_cast<T>(sn * x1 + c * x2);
  }
}

}  // namespace kiln::cpu
