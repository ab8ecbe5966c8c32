// CPU kernels for BitShift and the Bitwise* operators on integer tensors.
#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"

namespace kiln::cpu {
namespace {

template <typename Op>
KernelFn bitwiseBinary(std::string opType, Op op) {
  return [opType, op](KernelContext& ctx) {
    const Tensor& a = ctx.input(0);
    dispatchInteger(a.dtype(), opType.c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      mapBinary<T, T>(a, ctx.input(1), ctx.output(0), op);
    });
  };
}

KILN_REGISTER_CPU_KERNEL("BitwiseAnd", bitwiseBinary("BitwiseAnd", [](auto x, auto y) {
                           return static_cast<decltype(x)>(x & y);
                         }));
KILN_REGISTER_CPU_KERNEL("BitwiseOr", bitwiseBinary("BitwiseOr", [](auto x, auto y) {
                           return static_cast<decltype(x)>(x | y);
                         }));
KILN_REGISTER_CPU_KERNEL("BitwiseXor", bitwiseBinary("BitwiseXor", [](auto x, auto y) {
                           return static_cast<decltype(x)>(x ^ y);
                         }));
KILN_REGISTER_CPU_KERNEL("BitwiseNot", KernelFn([](KernelContext& ctx) {
                           const Tensor& x = ctx.input(0);
                           dispatchInteger(x.dtype(), "BitwiseNot", [&](auto tag) {
                             using T = typename decltype(tag)::type;
                             mapUnary<T, T>(x, ctx.output(0),
                                            [](auto v) { return static_cast<decltype(v)>(~v); });
                           });
                         }));

// Shift amounts outside [0, bit width) give 0, except that right shifts of negative numbers give
// -1 (the sign fills every bit). Right shifts of signed values are arithmetic.
template <typename T>
bool shiftInRange(T amount) {
  if constexpr (std::is_signed_v<T>) {
    if (amount < 0) return false;
  }
  return static_cast<uint64_t>(amount) < sizeof(T) * 8;
}
template <typename T>
T shiftLeft(T x, T amount) {
  using U = std::make_unsigned_t<T>;
  if (!shiftInRange(amount)) return T(0);
  return static_cast<T>(static_cast<U>(static_cast<U>(x) << amount));
}
template <typename T>
T shiftRight(T x, T amount) {
  if (!shiftInRange(amount)) {
    if constexpr (std::is_signed_v<T>)
      return x < 0 ? T(-1) : T(0);
    else
      return T(0);
  }
  return static_cast<T>(x >> amount);
}

KILN_REGISTER_CPU_KERNEL(
    "BitShift", KernelFactory([](const KernelCreateInfo& info) -> KernelFn {
      const std::string direction = ir::attrString(info.node, "direction");
      if (direction == "LEFT")
        return bitwiseBinary("BitShift", [](auto x, auto y) { return shiftLeft(x, y); });
      if (direction == "RIGHT")
        return bitwiseBinary("BitShift", [](auto x, auto y) { return shiftRight(x, y); });
      ir::failNode(info.node,
                   "attribute 'direction' must be LEFT or RIGHT, got '" + direction + "'");
    }));

}  // namespace
}  // namespace kiln::cpu
