// Building blocks for elementwise kernels: typed unary maps and broadcast binary maps.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>

#include "backends/cpu/broadcast.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/thread_pool.h"
#include "core/dtype_dispatch.h"

namespace kiln::cpu {

/// Compute type for T: float for the 16-bit floats, T otherwise.
template <typename T>
using ComputeType =
    std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

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
    return static_cast<T>(
        static_cast<U>(static_cast<P>(static_cast<U>(a)) * static_cast<P>(static_cast<U>(b))));
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
    for (int64_t i = begin; i < end; ++i)
      y[i] = static_cast<Out>(op(static_cast<ComputeType<In>>(x[i])));
  });
}

/// v in its compute type; a reference when no conversion is needed (no string copies).
template <typename T>
decltype(auto) toCompute(const T& v) {
  if constexpr (std::is_same_v<ComputeType<T>, T>)
    return (v);
  else
    return static_cast<ComputeType<T>>(v);
}

/// z[i] = op(x[i], pattern[i]) (kPatternFirst false) or op(pattern[i], x[i]) for i < n.
template <bool kPatternFirst, typename X, typename P, typename Out, typename Op>
void mapAgainstPattern(const X* x, const P* __restrict pattern, Out* z, int64_t n, const Op& op) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (kPatternFirst)
      z[i] = static_cast<Out>(op(pattern[i], toCompute(x[i])));
    else
      z[i] = static_cast<Out>(op(toCompute(x[i]), pattern[i]));
  }
}

/// mapBinaryMixed for a periodic broadcast (broadcast.h), with threads taking ranges of output
/// rows. The repeated row is copied into a pattern of at least kPatternLength elements so that the
/// inner loop is a long vectorisable pass over contiguous arrays even when rows are short (the 16
/// lanes of an NCHWc pixel). kRepeatedA: input a is the repeated one.
template <bool kRepeatedA, typename InA, typename InB, typename Out, typename Op>
void mapBinaryPeriodic(const InA* pa, const InB* pb, Out* po, const CoalescedBroadcast<2>& cb,
                       int64_t rows, int64_t cols, const Op& op) {
  using Repeated = std::conditional_t<kRepeatedA, InA, InB>;
  constexpr int64_t kPatternLength = 256;
  const int64_t tiles = shapeNumel(cb.dims) / (rows * cols);
  const int64_t period = cols * std::max<int64_t>(1, kPatternLength / cols);
  parallelForAtLeast(tiles * rows, std::max<int64_t>(1, kMinElementsPerThread / cols),
                     [&](int64_t u0, int64_t u1) {
                       // Not a std::vector: vector<bool> has no data().
                       const std::unique_ptr<ComputeType<Repeated>[]> pattern(
                           new ComputeType<Repeated>[static_cast<size_t>(period)]);
                       for (int64_t u = u0; u < u1;) {
                         const int64_t tile = u / rows, row = u % rows;
                         const int64_t count = std::min(rows - row, u1 - u);
                         const std::array<int64_t, 2> at = tileOffsets(cb, tile);
                         const Repeated* repeated;
                         if constexpr (kRepeatedA)
                           repeated = pa + at[0];
                         else
                           repeated = pb + at[1];
                         for (int64_t p = 0; p < period; p += cols) {
                           for (int64_t c = 0; c < cols; ++c)
                             pattern[p + c] = toCompute(repeated[c]);
                         }
                         const int64_t start = (tile * rows + row) * cols, length = count * cols;
                         for (int64_t done = 0; done < length; done += period) {
                           const int64_t n = std::min(period, length - done);
                           if constexpr (kRepeatedA) {
                             mapAgainstPattern<true>(pb + at[1] + row * cols + done, pattern.get(),
                                                     po + start + done, n, op);
                           } else {
                             mapAgainstPattern<false>(pa + at[0] + row * cols + done, pattern.get(),
                                                      po + start + done, n, op);
                           }
                         }
                         u += count;
                       }
                     });
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
  const auto runs = [&](int64_t o, const std::array<int64_t, 2>& off, int64_t n,
                        const std::array<int64_t, 2>& st) {
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
  if (const std::optional<PeriodicBroadcast> periodic = findPeriodicBroadcast(cb)) {
    if (periodic->repeated == 0)
      mapBinaryPeriodic<true, InA, InB, Out>(pa, pb, po, cb, periodic->rows, periodic->cols, op);
    else
      mapBinaryPeriodic<false, InA, InB, Out>(pa, pb, po, cb, periodic->rows, periodic->cols, op);
    return;
  }
  // Each thread takes a contiguous slice of the output (runs may be cut mid-way).
  parallelForAtLeast(total, kMinElementsPerThread, [&](int64_t begin, int64_t end) {
    forEachBroadcastRunIn<2>(cb, begin, end, runs);
  });
}

/// out = op(a, b) with numpy broadcasting; a and b share the element type In.
template <typename In, typename Out, typename Op>
void mapBinary(const Tensor& a, const Tensor& b, Tensor& out, Op op) {
  mapBinaryMixed<In, In, Out>(a, b, out, op);
}

}  // namespace kiln::cpu
