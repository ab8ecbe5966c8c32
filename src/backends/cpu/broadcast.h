// Iteration over numpy-broadcast operands in contiguous runs.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::cpu {

/// Strides (in elements) of `shape` viewed at the rank of `outShape`, 0 along broadcast dims.
std::vector<int64_t> broadcastStrides(const Shape& shape, const Shape& outShape);

/// Calls fn(outOffset, inOffsets, count, inSteps) for runs of `count` consecutive output elements;
/// input k's element j of the run is at inOffsets[k] + j * inSteps[k] (steps are 0 or 1).
template <size_t N, typename Fn>
void forEachBroadcastRun(const Shape& outShape, const std::array<const Shape*, N>& inShapes, Fn&& fn) {
  const size_t rank = outShape.size();
  const int64_t total = shapeNumel(outShape);
  if (total == 0) return;
  std::array<std::vector<int64_t>, N> strides;
  for (size_t k = 0; k < N; ++k) strides[k] = broadcastStrides(*inShapes[k], outShape);
  if (rank == 0) {
    std::array<int64_t, N> offsets{}, steps{};
    fn(int64_t{0}, offsets, int64_t{1}, steps);
    return;
  }
  const int64_t inner = outShape[rank - 1];
  std::array<int64_t, N> steps;
  for (size_t k = 0; k < N; ++k) steps[k] = strides[k][rank - 1];
  std::vector<int64_t> index(rank, 0);
  std::array<int64_t, N> offsets{};
  for (int64_t out = 0; out < total; out += inner) {
    fn(out, offsets, inner, steps);
    // Advance the multi-index over all but the innermost dim.
    for (size_t d = rank - 1; d-- > 0;) {
      ++index[d];
      for (size_t k = 0; k < N; ++k) offsets[k] += strides[k][d];
      if (index[d] < outShape[d]) break;
      for (size_t k = 0; k < N; ++k) offsets[k] -= strides[k][d] * outShape[d];
      index[d] = 0;
    }
  }
}

}  // namespace kiln::cpu
