// Iteration helpers for kernels that reduce or scan along axes.
#pragma once
#include <cstdint>
#include <type_traits>
#include <vector>

#include "backends/cpu/broadcast.h"
#include "backends/cpu/kernel.h"
#include "core/half.h"

namespace kiln::cpu {

/// CumSum's and CumProd's attributes.
struct CumulativeAttrs {
  bool exclusive = false, reverse = false;
};
inline CumulativeAttrs cumulativeAttrs(const ir::Node& node) {
  return {ir::attrInt(node, "exclusive", 0) != 0, ir::attrInt(node, "reverse", 0) != 0};
}

/// Accumulator type for reductions over T: float for float and the 16-bit floats, double for
/// double, the 64-bit integer of T's signedness for integers, uint8_t for bool (0 or 1, so max
/// is "any" and min is "all").
template <typename T>
using ReduceAccType = std::conditional_t<
    std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> || std::is_same_v<T, float>, float,
    std::conditional_t<
        std::is_same_v<T, double>, double,
        std::conditional_t<std::is_same_v<T, bool>, uint8_t,
                           std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>>>;

/// A tensor seen as [outer, extent, inner] around one axis.
struct AxisBlocks {
  int64_t outer = 1;
  int64_t extent = 1;
  int64_t inner = 1;
};

inline AxisBlocks axisBlocks(const Shape& shape, size_t axis) {
  AxisBlocks b;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d < axis)
      b.outer *= shape[d];
    else if (d == axis)
      b.extent = shape[d];
    else
      b.inner *= shape[d];
  }
  return b;
}

/// Visits the input of a reduction in contiguous runs: fn(inOffset, outOffset, count, reducedRun).
/// In a reduced run all `count` inputs fold into output outOffset; otherwise input j of the run
/// folds into output outOffset + j. Adjacent axes of the same kind are merged first so runs are
/// as long as possible.
template <typename Fn>
void forEachReductionRun(const Shape& inShape, const std::vector<bool>& reduced, Fn&& fn) {
  Shape merged, mergedOut;
  int lastKind = -1;  // 0 kept, 1 reduced
  for (size_t d = 0; d < inShape.size(); ++d) {
    if (inShape[d] == 1) continue;  // size-1 axes change no offsets
    const int kind = reduced[d] ? 1 : 0;
    if (kind == lastKind) {
      merged.back() *= inShape[d];
      mergedOut.back() *= kind ? 1 : inShape[d];
    } else {
      merged.push_back(inShape[d]);
      mergedOut.push_back(kind ? 1 : inShape[d]);
      lastKind = kind;
    }
  }
  forEachBroadcastRun<1>(
      merged, {&mergedOut},
      [&](int64_t in, const std::array<int64_t, 1>& out, int64_t n,
          const std::array<int64_t, 1>& step) { fn(in, out[0], n, step[0] == 0); });
}

}  // namespace kiln::cpu
