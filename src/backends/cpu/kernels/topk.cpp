// CPU kernel of TopK: the k largest (or smallest) values along an axis and their indices;
// equal values keep the lower index first.
#include <algorithm>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/reduce_runs.h"
#include "backends/cpu/kernels/run_checks.h"

namespace kiln::cpu {
namespace {

struct TopKAttrs {
  std::optional<int64_t> k;  // the attribute before opset 10, input 1 from then on
  int64_t axis = -1;
  bool largest = true;
};

TopKAttrs topKAttrs(const ir::Node& node) {
  TopKAttrs a;
  if (node.opset < 10) a.k = ir::attrInt(node, "k");
  a.axis = ir::attrInt(node, "axis", -1);
  a.largest = ir::attrInt(node, "largest", 1) != 0;
  return a;
}

void topKKernel(KernelContext& ctx, const TopKAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  int64_t k = 0;
  if (attrs.k) {
    k = *attrs.k;
  } else {
    const std::vector<int64_t> ks = ctx.input(1).toInt64Vector();
    if (ks.size() != 1) ctx.fail("K must hold one value");
    k = ks[0];
  }
  if (x.rank() == 0) ctx.fail("needs an input of rank >= 1");
  const auto axis =
      static_cast<size_t>(normalizeAxis(ctx, attrs.axis, static_cast<int64_t>(x.rank())));
  const bool largest = attrs.largest;
  const AxisBlocks b = axisBlocks(x.shape(), axis);
  if (k < 0 || k > b.extent) {
    ctx.fail("k = " + std::to_string(k) + " is out of range for an axis of size " +
             std::to_string(b.extent));
  }
  Tensor& values = ctx.output(0);
  int64_t* indices = ctx.wantsOutput(1) ? ctx.output(1).data<int64_t>() : nullptr;
  // An empty input has nothing to rank, however long the axis (which sizes the scratch below).
  if (x.numel() == 0) return;
  dispatchNumeric(x.dtype(), "TopK", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    struct Item {
      C value;
      int64_t index;
    };
    // A strict total order even with NaN (ranked above every number, as numpy sorts it).
    auto before = [largest](const Item& a, const Item& c) {
      const bool aNan = a.value != a.value, cNan = c.value != c.value;
      if (aNan != cNan) return aNan == largest;
      if (!aNan && a.value != c.value) return largest ? a.value > c.value : a.value < c.value;
      return a.index < c.index;
    };
    const T* px = x.data<T>();
    T* pv = values.data<T>();
    std::vector<Item> items(static_cast<size_t>(b.extent));
    for (int64_t o = 0; o < b.outer; ++o) {
      for (int64_t i = 0; i < b.inner; ++i) {
        const T* in = px + o * b.extent * b.inner + i;
        for (int64_t r = 0; r < b.extent; ++r) items[r] = Item{C(in[r * b.inner]), r};
        std::partial_sort(items.begin(), items.begin() + k, items.end(), before);
        const int64_t outBase = o * k * b.inner + i;
        for (int64_t r = 0; r < k; ++r) {
          pv[outBase + r * b.inner] = static_cast<T>(items[r].value);
          if (indices) indices[outBase + r * b.inner] = items[r].index;
        }
      }
    }
  });
}

KILN_REGISTER_CPU_KERNEL("TopK", bindKernel(topKAttrs, topKKernel));

}  // namespace
}  // namespace kiln::cpu
