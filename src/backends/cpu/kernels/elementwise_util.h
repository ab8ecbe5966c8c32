// Building blocks for elementwise kernels: typed unary maps and broadcast binary maps.
#pragma once
#include "backends/cpu/broadcast.h"
#include "backends/cpu/kernel.h"
#include "core/dtype_dispatch.h"

namespace kiln::cpu {

/// Compute type for T: float for the 16-bit floats, T otherwise.
template <typename T>
using ComputeType = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

/// out[i] = op(in[i]) with Out/In storage types; op works on ComputeType<In>.
template <typename In, typename Out, typename Op>
void mapUnary(const Tensor& in, Tensor& out, Op op) {
  const In* x = in.data<In>();
  Out* y = out.data<Out>();
  const int64_t n = in.numel();
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<Out>(op(static_cast<ComputeType<In>>(x[i])));
}

/// out = op(a, b) with numpy broadcasting.
template <typename In, typename Out, typename Op>
void mapBinary(const Tensor& a, const Tensor& b, Tensor& out, Op op) {
  const In* pa = a.data<In>();
  const In* pb = b.data<In>();
  Out* po = out.data<Out>();
  using C = ComputeType<In>;
  forEachBroadcastRun<2>(out.shape(), {&a.shape(), &b.shape()},
                         [&](int64_t o, const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
                           const In* x = pa + off[0];
                           const In* y = pb + off[1];
                           Out* z = po + o;
                           if (st[0] && st[1]) {
                             for (int64_t i = 0; i < n; ++i) z[i] = static_cast<Out>(op(C(x[i]), C(y[i])));
                           } else if (st[0]) {
                             const C yv = C(*y);
                             for (int64_t i = 0; i < n; ++i) z[i] = static_cast<Out>(op(C(x[i]), yv));
                           } else if (st[1]) {
                             const C xv = C(*x);
                             for (int64_t i = 0; i < n; ++i) z[i] = static_cast<Out>(op(xv, C(y[i])));
                           } else {
                             const Out v = static_cast<Out>(op(C(*x), C(*y)));
                             for (int64_t i = 0; i < n; ++i) z[i] = v;
                           }
                         });
}

}  // namespace kiln::cpu
