// Building blocks for elementwise kernels: typed unary maps and broadcast binary maps.
#pragma once
#include <cstdint>
#include <type_traits>

#include "backends/cpu/broadcast.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/thread_pool.h"
#include "core/dtype_dispatch.h"

namespace kiln::cpu {

/// Compute type for T: float for the 16-bit floats, T otherwise.
template <typename T>
using ComputeType = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

/// Wrapping integer arithmetic: signed overflow wraps like numpy instead of being undefined.
template <typename T>
T wrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <typename T>
T wrapSub(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return a - b;
  }
}
template <typename T>
T wrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    // Promote to at least unsigned int so that uint16 * uint16 does not overflow a signed int.
    using P = std::common_type_t<U, unsigned>;
    return static_cast<T>(static_cast<U>(static_cast<P>(static_cast<U>(a)) * static_cast<P>(static_cast<U>(b))));
  } else {
    return a * b;
  }
}

/// Converts a floating-point value to an integer type without undefined behaviour, matching numpy
/// on x86: NaN and values outside int64 become INT64_MIN, then the value wraps to the target width.
template <typename To>
To floatToInteger(double v) {
  if constexpr (std::is_same_v<To, uint64_t>) {
    constexpr double two63 = 9223372036854775808.0;
    if (v >= two63 && v < 2 * two63) return static_cast<uint64_t>(v - two63) + (uint64_t{1} << 63);
  }
  constexpr double limit = 9223372036854775808.0;  // 2^63
  const int64_t wide = (v >= -limit && v < limit) ? static_cast<int64_t>(v) : INT64_MIN;
  return static_cast<To>(wide);
}

/// Converts one numeric or bool value to another numeric or bool type the way numpy's astype does.
template <typename To, typename From>
To convertNumber(From v) {
  using C = ComputeType<From>;
  const C x = static_cast<C>(v);
  if constexpr (std::is_same_v<To, bool>) {
    return x != C(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<C>) {
    return floatToInteger<To>(static_cast<double>(x));
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(x));
  } else {
    return static_cast<To>(x);
  }
}

/// out[i] = op(in[i]) with Out/In storage types; op works on ComputeType<In>. Large tensors are
/// split in contiguous blocks over the current thread pool (op must be a pure function).
template <typename In, typename Out, typename Op>
void mapUnary(const Tensor& in, Tensor& out, Op op) {
  const In* x = in.data<In>();
  Out* y = out.data<Out>();
  parallelForAtLeast(in.numel(), kMinElementsPerThread, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = static_cast<Out>(op(static_cast<ComputeType<In>>(x[i])));
  });
}

/// v in its compute type; a reference when no conversion is needed (no string copies).
template <typename T>
decltype(auto) toCompute(const T& v) {
  if constexpr (std::is_same_v<ComputeType<T>, T>) return (v);
  else return static_cast<ComputeType<T>>(v);
}

/// out = op(a, b) with numpy broadcasting, where a and b may have different element types.
/// `out` may be `a` itself when a already has the output's shape.
template <typename InA, typename InB, typename Out, typename Op>
void mapBinaryMixed(const Tensor& a, const Tensor& b, Tensor& out, Op op) {
  const InA* pa = a.data<InA>();
  const InB* pb = b.data<InB>();
  Out* po = out.data<Out>();
  using CA = ComputeType<InA>;
  using CB = ComputeType<InB>;
  const auto runs = [&](int64_t o, const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
    const InA* x = pa + off[0];
    const InB* y = pb + off[1];
    Out* z = po + o;
    if (st[0] && st[1]) {
      for (int64_t i = 0; i < n; ++i) z[i] = static_cast<Out>(op(toCompute(x[i]), toCompute(y[i])));
    } else if (st[0]) {
      const CB yv = CB(*y);
      for (int64_t i = 0; i < n; ++i) z[i] = static_cast<Out>(op(toCompute(x[i]), yv));
    } else if (st[1]) {
      const CA xv = CA(*x);
      for (int64_t i = 0; i < n; ++i) z[i] = static_cast<Out>(op(xv, toCompute(y[i])));
    } else {
      const Out v = static_cast<Out>(op(CA(*x), CB(*y)));
      for (int64_t i = 0; i < n; ++i) z[i] = v;
    }
  };
  const int64_t total = out.numel();
  if (total == 0) return;
  const CoalescedBroadcast<2> cb = coalesceBroadcast<2>(out.shape(), {&a.shape(), &b.shape()});
  // Each thread takes a contiguous slice of the output (runs may be cut mid-way).
  parallelForAtLeast(total, kMinElementsPerThread,
                     [&](int64_t begin, int64_t end) { forEachBroadcastRunIn<2>(cb, begin, end, runs); });
}

/// out = op(a, b) with numpy broadcasting; a and b share the element type In.
template <typename In, typename Out, typename Op>
void mapBinary(const Tensor& a, const Tensor& b, Tensor& out, Op op) {
  mapBinaryMixed<In, In, Out>(a, b, out, op);
}

}  // namespace kiln::cpu
