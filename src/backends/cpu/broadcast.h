// Iteration over numpy-broadcast operands in contiguous runs.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/internal_api.h"
#include "kiln/tensor.h"

namespace kiln::cpu {

/// Strides (in elements) of `shape` viewed at the rank of `outShape`, 0 along broadcast dims.
KILN_INTERNAL_API std::vector<int64_t> broadcastStrides(const Shape& shape, const Shape& outShape);

/// The output dims and per-input strides of a broadcast after merging adjacent dims that every
/// input walks the same way (both contiguous or both broadcast) and dropping size-1 dims, so that
/// e.g. [N,C,H,W] + [1,C,1,1] iterates as [N,C,H*W] with runs of H*W elements.
template <size_t N>
struct CoalescedBroadcast {
  Shape dims;
  std::array<std::vector<int64_t>, N> strides;
};

template <size_t N>
CoalescedBroadcast<N> coalesceBroadcast(const Shape& outShape,
                                        const std::array<const Shape*, N>& inShapes) {
  std::array<std::vector<int64_t>, N> full;
  for (size_t k = 0; k < N; ++k) full[k] = broadcastStrides(*inShapes[k], outShape);
  CoalescedBroadcast<N> result;
  for (size_t d = 0; d < outShape.size(); ++d) {
    if (outShape[d] == 1) continue;
    bool mergeable = !result.dims.empty();
    for (size_t k = 0; k < N && mergeable; ++k) {
      mergeable = result.strides[k].back() == full[k][d] * outShape[d];
    }
    if (mergeable) {
      result.dims.back() *= outShape[d];
      for (size_t k = 0; k < N; ++k) result.strides[k].back() = full[k][d];
    } else {
      result.dims.push_back(outShape[d]);
      for (size_t k = 0; k < N; ++k) result.strides[k].push_back(full[k][d]);
    }
  }
  return result;
}

/// A two-input broadcast whose two innermost coalesced dims [rows, cols] are walked contiguously
/// by one input (strides [cols, 1]) while the other repeats one row of cols elements along them
/// (strides [0, 1]): e.g. a blocked [N, Cb, H, W, 16] tensor times its squeeze-excitation scale
/// [N, Cb, 1, 1, 16], or a matrix plus a bias row. Each (outer index) tile of rows * cols output
/// elements is then input `contiguous` elementwise with a periodic copy of input `repeated`.
struct PeriodicBroadcast {
  int repeated = 0;  // the input (0 or 1) that repeats one row
  int64_t rows = 0;
  int64_t cols = 0;
};

inline std::optional<PeriodicBroadcast> findPeriodicBroadcast(const CoalescedBroadcast<2>& cb) {
  const size_t rank = cb.dims.size();
  if (rank < 2) return std::nullopt;
  const int64_t rows = cb.dims[rank - 2], cols = cb.dims[rank - 1];
  for (int repeated = 0; repeated < 2; ++repeated) {
    const std::vector<int64_t>& r = cb.strides[static_cast<size_t>(repeated)];
    const std::vector<int64_t>& c = cb.strides[static_cast<size_t>(1 - repeated)];
    if (r[rank - 2] == 0 && r[rank - 1] == 1 && c[rank - 2] == cols && c[rank - 1] == 1) {
      return PeriodicBroadcast{repeated, rows, cols};
    }
  }
  return std::nullopt;
}

/// The offsets of each input at the start of output tile `tile` (an index over all coalesced dims
/// but the two innermost) of a rank >= 2 coalesced broadcast.
template <size_t N>
std::array<int64_t, N> tileOffsets(const CoalescedBroadcast<N>& cb, int64_t tile) {
  std::array<int64_t, N> offsets{};
  for (size_t d = cb.dims.size() - 2; d-- > 0;) {
    const int64_t index = tile % cb.dims[d];
    tile /= cb.dims[d];
    for (size_t k = 0; k < N; ++k) offsets[k] += index * cb.strides[k][d];
  }
  return offsets;
}

/// Calls fn(outOffset, inOffsets, count, inSteps) for the runs of consecutive output elements
/// that cover output elements [begin, end) of a coalesced broadcast; input k's element j of a run
/// is at inOffsets[k] + j * inSteps[k] (steps are 0 or 1). A range may start or end mid-run, so
/// disjoint ranges can go to different threads.
template <size_t N, typename Fn>
void forEachBroadcastRunIn(const CoalescedBroadcast<N>& cb, int64_t begin, int64_t end, Fn&& fn) {
  if (begin >= end) return;
  const size_t rank = cb.dims.size();
  if (rank == 0) {  // a single element
    std::array<int64_t, N> offsets{}, steps{};
    fn(int64_t{0}, offsets, int64_t{1}, steps);
    return;
  }
  const int64_t inner = cb.dims[rank - 1];
  std::array<int64_t, N> steps;
  for (size_t k = 0; k < N; ++k) steps[k] = cb.strides[k][rank - 1];
  // The multi-index (over all but the innermost dim) of the run holding `begin`.
  std::vector<int64_t> index(rank, 0);
  std::array<int64_t, N> offsets{};
  int64_t run = begin / inner;
  for (size_t d = rank - 1; d-- > 0;) {
    index[d] = run % cb.dims[d];
    run /= cb.dims[d];
    for (size_t k = 0; k < N; ++k) offsets[k] += index[d] * cb.strides[k][d];
  }
  int64_t skip = begin % inner;  // elements of the first run before `begin`
  for (int64_t out = begin - skip; out < end; out += inner) {
    const int64_t count = std::min(inner, end - out) - skip;
    std::array<int64_t, N> at = offsets;
    for (size_t k = 0; k < N; ++k) at[k] += skip * steps[k];
    fn(out + skip, at, count, steps);
    skip = 0;
    // Advance the multi-index over all but the innermost dim.
    for (size_t d = rank - 1; d-- > 0;) {
      ++index[d];
      for (size_t k = 0; k < N; ++k) offsets[k] += cb.strides[k][d];
      if (index[d] < cb.dims[d]) break;
      for (size_t k = 0; k < N; ++k) offsets[k] -= cb.strides[k][d] * cb.dims[d];
      index[d] = 0;
    }
  }
}

/// Calls fn(outOffset, inOffsets, count, inSteps) for runs of `count` consecutive output elements;
/// input k's element j of the run is at inOffsets[k] + j * inSteps[k] (steps are 0 or 1).
template <size_t N, typename Fn>
void forEachBroadcastRun(const Shape& outShape, const std::array<const Shape*, N>& inShapes,
                         Fn&& fn) {
  const int64_t total = shapeNumel(outShape);
  if (total == 0) return;
  forEachBroadcastRunIn<N>(coalesceBroadcast<N>(outShape, inShapes), 0, total, fn);
}

}  // namespace kiln::cpu
