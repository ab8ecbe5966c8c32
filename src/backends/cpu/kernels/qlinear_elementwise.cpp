// CPU kernels of kiln::QLinearAdd, kiln::QLinearMul and kiln::QLinearGlobalAveragePool
// (ir/ops/quantized_elementwise.cpp), also registered for com.microsoft with QLinearSigmoid and
// QLinearLeakyRelu. Each repeats the arithmetic of the DequantizeLinear, float op and
// QuantizeLinear it replaces, so it gives the same bytes: operands dequantized to float as
// DequantizeLinear does, the op in float (the pooling sum in double, which is exact for planes up
// to 2^20 elements whatever the order, as GlobalAveragePool sums: four partial sums over a table of
// the 256 dequantized values, planes over the thread pool), quantized as QuantizeLinear
// does. Add and Mul with 8-bit outputs run eight or sixteen lanes at a time (qlinear_binary_run.h),
// large outputs split in contiguous slices over the thread pool.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/broadcast.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels/qlinear_binary_run.h"
#include "backends/cpu/kernels/qlinear_pool_sums.h"
#include "backends/cpu/kernels/qlinear_quantization.h"
#include "backends/cpu/thread_pool.h"
#include "ir/node_attrs.h"

namespace kiln::cpu {
namespace {

// The number of trailing channels when `small` is one value per channel of c's last dim
// ([1, ..., 1, C], a channels-last squeeze-and-excitation scale), else 0.
int64_t perLastChannel(const Shape& small, const Shape& c) {
  if (small.empty() || c.empty() || small.back() != c.back() || small.back() < 2) return 0;
  return shapeNumel(small) == small.back() ? small.back() : 0;
}

// C = A op B with one operand per last-dim channel and the other of C's shape: broadcasting would
// cut C into runs of one pixel's channels (a few dozen bytes each); the small operand repeated to
// a few thousand bytes gives runs that long. False when the shapes are not so.
template <typename A, typename B, typename Q>
bool runPerChannelLast(QLinearBinaryOp op, const Tensor& a, const A* pa, const Quantization& qa,
                       const Tensor& b, const B* pb, const Quantization& qb, const Tensor& c,
                       Q* out, const Quantization& qc) {
  const bool smallA = a.shape() != c.shape();
  if (smallA == (b.shape() != c.shape())) return false;
  const int64_t channels = perLastChannel(smallA ? a.shape() : b.shape(), c.shape());
  if (channels == 0) return false;
  const int64_t total = c.numel(), run = channels * std::max<int64_t>(1, 4096 / channels);
  std::vector<std::remove_const_t<A>> repeatedA;
  std::vector<std::remove_const_t<B>> repeatedB;
  auto repeat = [&](auto& buffer, const auto* values) {
    buffer.resize(static_cast<size_t>(run));
    for (int64_t i = 0; i < run; ++i) buffer[static_cast<size_t>(i)] = values[i % channels];
  };
  if (smallA) {
    repeat(repeatedA, pa);
  } else {
    repeat(repeatedB, pb);
  }
  parallelForAtLeast((total + run - 1) / run, std::max<int64_t>(1, kMinElementsPerThread / run),
                     [&](int64_t r0, int64_t r1) {
                       for (int64_t r = r0; r < r1; ++r) {
                         const int64_t o = r * run, n = std::min(run, total - o);
                         qlinearBinaryRun(op, smallA ? repeatedA.data() : pa + o, 1, qa.inFloat(),
                                          smallA ? pb + o : repeatedB.data(), 1, qb.inFloat(),
                                          out + o, n, qc.inFloat());
                       }
                     });
  return true;
}

template <QLinearBinaryOp kOp>
void qlinearBinary(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  const Quantization qa = quantizationAt(ctx, 1, "A_scale", "A_zero_point");
  const Quantization qb = quantizationAt(ctx, 4, "B_scale", "B_zero_point");
  const Quantization qc = quantizationAt(ctx, 6, "C_scale", "C_zero_point");
  Tensor& c = ctx.output(0);
  withEightBit(a, "A", [&](auto* pa) {
    withEightBit(b, "B", [&](auto* pb) {
      dispatchQuantized(c.dtype(), "C", [&](auto tag) {
        using Q = typename decltype(tag)::type;
        Q* out = c.data<Q>();
        const int64_t total = c.numel();
        if (total == 0) return;
        if constexpr (sizeof(Q) == 1) {
          if (runPerChannelLast(kOp, a, pa, qa, b, pb, qb, c, out, qc)) return;
        }
        const CoalescedBroadcast<2> cb = coalesceBroadcast<2>(c.shape(), {&a.shape(), &b.shape()});
        // Each thread takes a contiguous slice of the output (runs may be cut mid-way).
        parallelForAtLeast(total, kMinElementsPerThread, [&](int64_t begin, int64_t end) {
          forEachBroadcastRunIn<2>(
              cb, begin, end, [&](int64_t o, const auto& at, int64_t n, const auto& step) {
                if constexpr (sizeof(Q) == 1) {
                  qlinearBinaryRun(kOp, pa + at[0], step[0], qa.inFloat(), pb + at[1], step[1],
                                   qb.inFloat(), out + o, n, qc.inFloat());
                } else {  // 16- and 32-bit outputs (QuantizeLinear-21 types): element by element
                  for (int64_t j = 0; j < n; ++j) {
                    const float x = qa.dequantize(pa[at[0] + j * step[0]]),
                                y = qb.dequantize(pb[at[1] + j * step[1]]);
                    out[o + j] = qc.quantize<Q>(kOp == QLinearBinaryOp::kMul ? x * y : x + y);
                  }
                }
              });
        });
      });
    });
  });
}

// channels_last = 1 (X [N, spatial..., C]): each image's channels are summed side by side, pixel
// after pixel, which gives the same doubles as the channels-first order (the sums are exact).
void qlinearGlobalAveragePool(KernelContext& ctx, bool channelsLast) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 3)
    ctx.fail("X must have rank 3 or more, got " + x.describe(), ErrorCode::kInvalidArgument);
  const Quantization qx = quantizationAt(ctx, 1, "x_scale", "x_zero_point");
  const Quantization qy = quantizationAt(ctx, 3, "y_scale", "y_zero_point");
  Tensor& y = ctx.output(0);
  const int64_t channels = x.dim(channelsLast ? x.rank() - 1 : 1);
  const int64_t planes = x.dim(0) * channels;
  const int64_t size = planes == 0 ? 0 : x.numel() / planes;
  withEightBit(x, "X", [&](auto* px) {
    using X = std::remove_const_t<std::remove_pointer_t<decltype(px)>>;
    // The 256 dequantized values. The sum is exact (file comment), so four partial sums give the
    // same double.
    std::array<float, 256> table;
    for (int v = 0; v < 256; ++v)
      table[static_cast<size_t>(v)] = qx.dequantize(v + std::numeric_limits<X>::lowest());
    const auto at = [&](int64_t i) {
      return static_cast<double>(
          table[static_cast<size_t>(px[i] - std::numeric_limits<X>::lowest())]);
    };
    dispatchQuantized(y.dtype(), "Y", [&](auto tag) {
      using Q = typename decltype(tag)::type;
      Q* out = y.data<Q>();
      if (channelsLast) {
        // Images and blocks of sixteen channels over the pool.
        const int64_t blocks = (channels + 15) / 16;
        const bool vector = cpuSupports(CpuIsa::kAvx512);
        parallelForAtLeast(x.dim(0) * blocks, 1, [&](int64_t i0, int64_t i1) {
          std::array<double, 16> sums;
          for (int64_t i = i0; i < i1; ++i) {
            const int64_t n = i / blocks, c0 = (i % blocks) * 16;
            const int64_t lanes = std::min<int64_t>(16, channels - c0);
            const int64_t first = n * size * channels + c0;
            if (vector) {
              sumDequantizedChannelsAvx512(reinterpret_cast<const uint8_t*>(px) + first,
                                           std::is_same_v<X, int8_t>, size, channels, lanes,
                                           qx.scale, qx.zeroPoint, sums.data());
            } else {
              sums.fill(0.0);
              for (int64_t p = 0; p < size; ++p)
                for (int64_t c = 0; c < lanes; ++c)
                  sums[static_cast<size_t>(c)] += at(first + p * channels + c);
            }
            for (int64_t c = 0; c < lanes; ++c) {
              out[n * channels + c0 + c] = qy.quantize<Q>(
                  static_cast<float>(sums[static_cast<size_t>(c)] / static_cast<double>(size)));
            }
          }
        });
        return;
      }
      const int64_t perThread =
          std::max<int64_t>(1, kMinElementsPerThread / std::max<int64_t>(1, size));
      parallelForAtLeast(planes, perThread, [&](int64_t pBegin, int64_t pEnd) {
        for (int64_t p = pBegin; p < pEnd; ++p) {
          const int64_t begin = p * size, end = begin + size;
          std::array<double, 4> sums{};
          int64_t i = begin;
          // Past 2^20 elements the sum may round: then one sum in order, as before.
          for (; size <= (int64_t{1} << 20) && i + 4 <= end; i += 4) {
            for (size_t k = 0; k < 4; ++k) sums[k] += at(i + static_cast<int64_t>(k));
          }
          for (; i < end; ++i) sums[0] += at(i);
          const double sum = (sums[0] + sums[1]) + (sums[2] + sums[3]);
          out[p] = qy.quantize<Q>(static_cast<float>(sum / static_cast<double>(size)));
        }
      });
    });
  });
}

KernelFn qlinearGlobalAveragePoolKernel(const KernelCreateInfo& info) {
  const bool channelsLast = ir::attrInt(info.node, "channels_last", 0) != 0;
  return [channelsLast](KernelContext& ctx) { qlinearGlobalAveragePool(ctx, channelsLast); };
}

// y = quantize(f(dequantize(x))) through a table of the 256 values an 8-bit x can take.
template <typename Fn>
KernelFn qlinearUnary(Fn f) {
  return [f](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Quantization qx = quantizationAt(ctx, 1, "X_scale", "X_zero_point");
    const Quantization qy = quantizationAt(ctx, 3, "Y_scale", "Y_zero_point");
    Tensor& y = ctx.output(0);
    withEightBit(x, "X", [&](auto* px) {
      using Q = std::remove_const_t<std::remove_pointer_t<decltype(px)>>;
      std::array<Q, 256> table;
      for (int v = 0; v < 256; ++v) {
        const Q q = static_cast<Q>(v + std::numeric_limits<Q>::lowest());
        table[static_cast<size_t>(v)] = qy.quantize<Q>(f(qx.dequantize(q)));
      }
      Q* out = y.data<Q>();
      for (int64_t i = 0; i < x.numel(); ++i)
        out[i] = table[static_cast<size_t>(px[i] - std::numeric_limits<Q>::lowest())];
    });
  };
}

KernelFactory qlinearLeakyRelu() {
  return [](const KernelCreateInfo& info) -> KernelFn {
    const float alpha = ir::attrFloat(info.node, "alpha", 0.01f);
    return qlinearUnary([alpha](float v) { return v >= 0.0f ? v : alpha * v; });
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("kiln", "QLinearAdd", qlinearBinary<QLinearBinaryOp::kAdd>);
KILN_REGISTER_CPU_KERNEL_DOMAIN("kiln", "QLinearMul", qlinearBinary<QLinearBinaryOp::kMul>);
KILN_REGISTER_CPU_KERNEL_DOMAIN("kiln", "QLinearGlobalAveragePool",
                                KernelFactory(qlinearGlobalAveragePoolKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "QLinearAdd",
                                qlinearBinary<QLinearBinaryOp::kAdd>);
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "QLinearMul",
                                qlinearBinary<QLinearBinaryOp::kMul>);
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "QLinearGlobalAveragePool",
                                KernelFactory(qlinearGlobalAveragePoolKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "QLinearSigmoid",
                                qlinearUnary([](float v) { return 1.0f / (1.0f + std::exp(-v)); }));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "QLinearLeakyRelu", qlinearLeakyRelu());

}  // namespace kiln::cpu
