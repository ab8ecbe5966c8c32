// CPU kernels of ArgMax and ArgMin: the index of the first (or, with select_last_index, the
// last) extreme element along one axis.
#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/reduce_runs.h"
#include "backends/cpu/kernels/run_checks.h"

namespace kiln::cpu {
namespace {

struct ArgReduceAttrs {
  std::string opType;
  int64_t axis = 0;
  bool selectLast = false;
};

ArgReduceAttrs argReduceAttrs(const ir::Node& node) {
  return {node.opType, ir::attrInt(node, "axis", 0),
          ir::attrInt(node, "select_last_index", 0) != 0};
}

template <bool kMax>
KernelFactory argReduceKernel() {
  return bindKernel(argReduceAttrs, [](KernelContext& ctx, const ArgReduceAttrs& attrs) {
    const Tensor& x = ctx.input(0);
    if (x.rank() == 0) ctx.fail("needs an input of rank >= 1");
    const auto axis =
        static_cast<size_t>(normalizeAxis(ctx, attrs.axis, static_cast<int64_t>(x.rank())));
    const bool selectLast = attrs.selectLast;
    const AxisBlocks b = axisBlocks(x.shape(), axis);
    if (b.extent == 0 && b.outer * b.inner > 0)
      ctx.fail("cannot take an arg-extreme over an empty axis");
    int64_t* py = ctx.output(0).data<int64_t>();
    dispatchNumeric(x.dtype(), attrs.opType.c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      // Strictly better replaces the best; with select_last_index, ties replace it too.
      auto better = [selectLast](C v, C best) {
        if constexpr (kMax)
          return selectLast ? v >= best : v > best;
        else
          return selectLast ? v <= best : v < best;
      };
      const T* px = x.data<T>();
      std::vector<C> best(static_cast<size_t>(b.inner));
      for (int64_t o = 0; o < b.outer; ++o) {
        const T* block = px + o * b.extent * b.inner;
        int64_t* out = py + o * b.inner;
        for (int64_t i = 0; i < b.inner; ++i) {
          best[i] = C(block[i]);
          out[i] = 0;
        }
        for (int64_t r = 1; r < b.extent; ++r) {
          const T* row = block + r * b.inner;
          for (int64_t i = 0; i < b.inner; ++i) {
            const C v = C(row[i]);
            const bool take = better(v, best[i]);
            best[i] = take ? v : best[i];
            out[i] = take ? r : out[i];
          }
        }
      }
    });
  });
}

KILN_REGISTER_CPU_KERNEL("ArgMax", argReduceKernel<true>());
KILN_REGISTER_CPU_KERNEL("ArgMin", argReduceKernel<false>());

}  // namespace
}  // namespace kiln::cpu
