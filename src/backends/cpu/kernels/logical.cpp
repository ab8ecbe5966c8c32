// CPU kernels for comparisons, boolean logic, Where and the NaN/Inf tests.
#include <cmath>
#include <limits>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"

namespace kiln::cpu {
namespace {

// A comparison over numeric types (plus bool and string when `anyType`), bool output.
template <bool anyType, typename Op>
KernelFn comparison(std::string opType, Op op) {
  return [opType, op](KernelContext& ctx) {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    Tensor& y = ctx.output(0);
    auto run = [&](auto tag) {
      using T = typename decltype(tag)::type;
      mapBinary<T, bool>(a, b, y, op);
    };
    if constexpr (anyType)
      dispatchAll(a.dtype(), opType.c_str(), run);
    else
      dispatchNumeric(a.dtype(), opType.c_str(), run);
  };
}

KILN_REGISTER_CPU_KERNEL("Equal", comparison<true>("Equal", [](const auto& x, const auto& y) {
                           return x == y;
                         }));
KILN_REGISTER_CPU_KERNEL("Less", comparison<false>("Less", [](auto x, auto y) { return x < y; }));
KILN_REGISTER_CPU_KERNEL("Greater",
                         comparison<false>("Greater", [](auto x, auto y) { return x > y; }));
KILN_REGISTER_CPU_KERNEL("LessOrEqual",
                         comparison<false>("LessOrEqual", [](auto x, auto y) { return x <= y; }));
KILN_REGISTER_CPU_KERNEL("GreaterOrEqual", comparison<false>("GreaterOrEqual", [](auto x, auto y) {
                           return x >= y;
                         }));

template <typename Op>
KernelFn boolBinary(Op op) {
  return [op](KernelContext& ctx) {
    mapBinary<bool, bool>(ctx.input(0), ctx.input(1), ctx.output(0), op);
  };
}

KILN_REGISTER_CPU_KERNEL("And", boolBinary([](bool x, bool y) { return x && y; }));
KILN_REGISTER_CPU_KERNEL("Or", boolBinary([](bool x, bool y) { return x || y; }));
KILN_REGISTER_CPU_KERNEL("Xor", boolBinary([](bool x, bool y) { return x != y; }));
KILN_REGISTER_CPU_KERNEL("Not", KernelFn([](KernelContext& ctx) {
                           mapUnary<bool, bool>(ctx.input(0), ctx.output(0),
                                                [](bool x) { return !x; });
                         }));

// Where: out = cond ? x : y, all three broadcast together. Copies storage values, so it works
// for every element type.
void whereKernel(KernelContext& ctx) {
  const Tensor& cond = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  Tensor& out = ctx.output(0);
  dispatchAll(x.dtype(), "Where", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool* pc = cond.data<bool>();
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    T* po = out.data<T>();
    forEachBroadcastRun<3>(out.shape(), {&cond.shape(), &x.shape(), &y.shape()},
                           [&](int64_t o, const std::array<int64_t, 3>& off, int64_t n,
                               const std::array<int64_t, 3>& st) {
                             const bool* c = pc + off[0];
                             const T* a = px + off[1];
                             const T* b = py + off[2];
                             T* z = po + o;
                             if (st[0] && st[1] && st[2]) {
                               for (int64_t i = 0; i < n; ++i) z[i] = c[i] ? a[i] : b[i];
                             } else {
                               for (int64_t i = 0; i < n; ++i)
                                 z[i] = c[i * st[0]] ? a[i * st[1]] : b[i * st[2]];
                             }
                           });
  });
}
KILN_REGISTER_CPU_KERNEL("Where", KernelFn(whereKernel));

KILN_REGISTER_CPU_KERNEL("IsNaN", KernelFn([](KernelContext& ctx) {
                           const Tensor& x = ctx.input(0);
                           dispatchFloat(x.dtype(), "IsNaN", [&](auto tag) {
                             using T = typename decltype(tag)::type;
                             mapUnary<T, bool>(x, ctx.output(0),
                                               [](auto v) { return std::isnan(v); });
                           });
                         }));

struct IsInfAttrs {
  bool positive = true, negative = true;
};

IsInfAttrs isInfAttrs(const ir::Node& node) {
  return {ir::attrInt(node, "detect_positive", 1) != 0,
          ir::attrInt(node, "detect_negative", 1) != 0};
}

KILN_REGISTER_CPU_KERNEL("IsInf",
                         bindKernel(isInfAttrs, [](KernelContext& ctx, const IsInfAttrs& attrs) {
                           const bool positive = attrs.positive, negative = attrs.negative;
                           const Tensor& x = ctx.input(0);
                           dispatchFloat(x.dtype(), "IsInf", [&](auto tag) {
                             using T = typename decltype(tag)::type;
                             mapUnary<T, bool>(x, ctx.output(0), [positive, negative](auto v) {
                               using V = decltype(v);
                               return (positive && v == std::numeric_limits<V>::infinity()) ||
                                      (negative && v == -std::numeric_limits<V>::infinity());
                             });
                           });
                         }));

}  // namespace
}  // namespace kiln::cpu
