#include "backends/cpu/kernels/pool_window.h"

#include <algorithm>

#include "backends/cpu/kernels/node_label.h"

namespace kiln::cpu {
namespace {

// Number of taps t in [0, kernel) with lo <= start + t * dilation < hi.
std::pair<int64_t, int64_t> tapsWithin(int64_t start, int64_t kernel, int64_t dilation, int64_t lo,
                                       int64_t hi) {
  int64_t first = start >= lo ? 0 : (lo - start + dilation - 1) / dilation;
  int64_t last = start >= hi ? 0 : std::min(kernel, (hi - start + dilation - 1) / dilation);
  return {first, std::max(first, last)};
}

}  // namespace

BoundPoolAttrs bindPoolAttrs(const ir::Node& node, std::optional<size_t> spatialRank) {
  BoundPoolAttrs bound;
  bound.node = nodeLabelWithAttrs(
      node, {"kernel_shape", "strides", "dilations", "pads", "auto_pad", "ceil_mode"});
  if (spatialRank) bound.attrs = ir::readPoolAttrs(node, *spatialRank);
  return bound;
}

ir::PoolAttrs poolAttrsFor(const KernelContext& ctx, const BoundPoolAttrs& bound) {
  if (!bound.attrs.kernel.empty()) return bound.attrs;
  if (ctx.input(0).rank() < 3) ctx.fail("expects an input of rank >= 3");
  return ir::readPoolAttrs(bound.node, ctx.input(0).rank() - 2);
}

PoolWindows makePoolWindows(const KernelContext& ctx, const BoundPoolAttrs& bound,
                            const ir::PoolAttrs& attrs, const Shape& inputShape) {
  const size_t spatial = attrs.kernel.size();
  if (spatial > 3)
    ctx.fail("pooling over more than 3 spatial dims is not supported", ErrorCode::kUnsupportedNode);
  std::vector<ir::PoolDim> dims = ir::resolvePoolDims(bound.node, attrs, inputShape);
  PoolWindows w;
  const size_t offset = 3 - spatial;
  for (size_t d = 0; d < 3; ++d) {
    ir::PoolDim pd;  // a unit dim with a 1-tap window
    pd.in = pd.out = 1;
    if (d >= offset) pd = dims[d - offset];
    w.in[d] = pd.in;
    w.out[d] = pd.out;
    w.dilation[d] = pd.dilation;
    w.taps[d].resize(static_cast<size_t>(pd.out));
    for (int64_t o = 0; o < pd.out; ++o) {
      TapRange& r = w.taps[d][static_cast<size_t>(o)];
      r.start = o * pd.stride - pd.padBegin;
      auto [first, last] = tapsWithin(r.start, pd.kernel, pd.dilation, 0, pd.in);
      r.first = first;
      r.last = last;
      auto [pFirst, pLast] =
          tapsWithin(r.start, pd.kernel, pd.dilation, -pd.padBegin, pd.in + pd.padEnd);
      r.paddedCount = pLast - pFirst;
    }
    if (d == 2) {
      w.lastStride = pd.stride;
      for (int64_t c = 0; c < pd.kernel; ++c) {
        ColumnTap t;
        t.offset = c * pd.dilation - pd.padBegin;
        t.lo = t.offset >= 0 ? 0 : (-t.offset + pd.stride - 1) / pd.stride;
        t.hi = t.offset >= pd.in ? 0
                                 : std::min(pd.out, (pd.in - t.offset + pd.stride - 1) / pd.stride);
        t.hi = std::max(t.lo, t.hi);
        w.columnTaps.push_back(t);
      }
    }
  }
  return w;
}

double readLpPower(const ir::Node& node) {
  const auto it = node.attrs.find("p");
  double p = 2;
  if (it != node.attrs.end() && std::holds_alternative<float>(it->second)) {
    p = std::get<float>(it->second);
  } else {
    p = static_cast<double>(ir::attrInt(node, "p", 2));
  }
  if (p <= 0) ir::failNode(node, "attribute 'p' must be positive");
  return p;
}

}  // namespace kiln::cpu
