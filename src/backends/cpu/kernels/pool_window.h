// Pooling windows for the CPU kernels: every spatial layout (1-D, 2-D, 3-D) is viewed as 3-D by
// prepending unit dims, and each output position's window is precomputed as the range of kernel
// taps that land inside the input.
#pragma once
#include <array>
#include <optional>
#include <vector>

#include "backends/cpu/kernel.h"
#include "ir/ops/pool_geometry.h"

namespace kiln::cpu {

/// The taps of one window along one dim: input index of tap t is start + t * dilation.
struct TapRange {
  int64_t start = 0;
  int64_t first = 0;        // first tap inside the input
  int64_t last = 0;         // one past the last tap inside the input
  int64_t paddedCount = 0;  // taps inside the input or its explicit padding
};

/// One kernel column (tap c along the last dim) and the output columns [lo, hi) for which it
/// lands inside the input, at input column o * stride + offset.
struct ColumnTap {
  int64_t offset = 0;
  int64_t lo = 0;
  int64_t hi = 0;
};

struct PoolWindows {
  std::array<int64_t, 3> in{1, 1, 1};
  std::array<int64_t, 3> out{1, 1, 1};
  std::array<int64_t, 3> dilation{1, 1, 1};
  std::array<std::vector<TapRange>, 3> taps;  // taps[d][o] for output position o along dim d
  int64_t lastStride = 1;
  std::vector<ColumnTap> columnTaps;  // the last dim's kernel taps, for row-at-a-time kernels

  int64_t inPlane() const { return in[0] * in[1] * in[2]; }
  int64_t outPlane() const { return out[0] * out[1] * out[2]; }
};

/// A pooling node's attributes as its kernel keeps them: read when the kernel is made if X's rank
/// is known then, else on each run; `node` is the label with the pooling attributes, for
/// ir::readPoolAttrs and ir::resolvePoolDims (which name the node when they fail).
struct BoundPoolAttrs {
  ir::Node node;
  ir::PoolAttrs attrs;  // kernel empty: read on each run
};
BoundPoolAttrs bindPoolAttrs(const ir::Node& node, std::optional<size_t> spatialRank);
/// The attributes for this run's input (rank >= 3).
ir::PoolAttrs poolAttrsFor(const KernelContext& ctx, const BoundPoolAttrs& bound);

/// Builds the windows of an N x C x spatial input; fails for more than 3 spatial dims.
PoolWindows makePoolWindows(const KernelContext& ctx, const BoundPoolAttrs& bound,
                            const ir::PoolAttrs& attrs, const Shape& inputShape);

/// LpPool's and GlobalLpPool's p (a float attribute in opset 1, an int afterwards; default 2).
double readLpPower(const ir::Node& node);

}  // namespace kiln::cpu
