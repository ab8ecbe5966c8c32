// Each channel is first copied into zero-padded "phase planes": plane p holds the padded columns
// p, p + S, p + 2S, ... so that for stride S every tap reads a contiguous run of a plane and the
// inner loop needs no bounds checks. Each 8-wide block of an output row then sums its K*K taps
// in a register and goes through the epilogue while it is in L1.
#include "backends/cpu/kernels/conv_depthwise.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels/reduce_simd.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

struct PlaneLayout {
  int64_t rows = 0;   // padded input rows
  int64_t width = 0;  // floats per plane row, with slack so a full vector can be read past the end
  int64_t size() const { return rows * width; }
};

template <int K, int S>
void convolveChannel(const ir::ConvGeometry& g, int64_t height, int64_t width, const float* x,
                     const float* w, float bias, const float* residual, const Activation& act,
                     float* y, const PlaneLayout& layout, float* planes) {
  const int64_t padTop = g.padsBegin[0], padLeft = g.padsBegin[1];
  const int64_t outH = g.output[0], outW = g.output[1];
  std::fill(planes, planes + S * layout.size(), 0.0f);
  for (int64_t iy = 0; iy < height; ++iy) {
    const float* src = x + iy * width;
    float* row = planes + (padTop + iy) * layout.width;
    if constexpr (S == 1) {
      std::memcpy(row + padLeft, src, static_cast<size_t>(width) * sizeof(float));
    } else {
      for (int64_t ix = 0; ix < width; ++ix) {
        const int64_t c = padLeft + ix;
        row[(c % S) * layout.size() + c / S] = src[ix];
      }
    }
  }
  Float8 taps[K * K];
  for (int t = 0; t < K * K; ++t) taps[t] = splat(w[t]);
  const Float8 b = splat(bias);
  float tail[8];
  for (int64_t oy = 0; oy < outH; ++oy) {
    const float* rows[K * S];  // rows[ky * S + p]: plane p's row for tap row ky
    for (int ky = 0; ky < K; ++ky) {
      for (int p = 0; p < S; ++p)
        rows[ky * S + p] = planes + p * layout.size() + (oy * S + ky) * layout.width;
    }
    float* out = y + oy * outW;
    for (int64_t ox = 0; ox < outW; ox += 8) {
      Float8 acc = b;
      for (int ky = 0; ky < K; ++ky) {
        for (int kx = 0; kx < K; ++kx)
          acc += taps[ky * K + kx] * load8(rows[ky * S + kx % S] + ox + kx / S);
      }
      if (ox + 8 <= outW) {
        store8(out + ox, acc);
      } else {
        store8(tail, acc);
        std::memcpy(out + ox, tail, static_cast<size_t>(outW - ox) * sizeof(float));
      }
    }
    applyEpilogue(act, out, outW, 0.0f, residual ? residual + oy * outW : nullptr);
  }
}

template <int K, int S>
void convolveAll(const ir::ConvGeometry& g, int64_t batch, int64_t channels, int64_t height,
                 int64_t width, const float* x, const float* w, const float* bias,
                 const float* residual, const Activation& act, float* y) {
  const int64_t paddedW = width + g.padsBegin[1] + g.padsEnd[1];
  PlaneLayout layout;
  layout.rows = std::max(height + g.padsBegin[0] + g.padsEnd[0], (g.output[0] - 1) * S + K);
  // Reads reach column outW - 1 + 7 + (K - 1) / S of a plane (a full vector past the last output).
  layout.width = std::max((paddedW + S - 1) / S, g.output[1] + 7 + (K - 1) / S + 1);
  const int64_t inSize = height * width, outSize = g.output[0] * g.output[1];
  parallelFor(batch * channels, [&](int64_t begin, int64_t end) {
    std::vector<float> planes(static_cast<size_t>(S * layout.size()));
    for (int64_t i = begin; i < end; ++i) {
      const int64_t c = i % channels;
      convolveChannel<K, S>(g, height, width, x + i * inSize, w + c * K * K, bias ? bias[c] : 0.0f,
                            residual ? residual + i * outSize : nullptr, act, y + i * outSize,
                            layout, planes.data());
    }
  });
}

}  // namespace

bool depthwiseConv2dSupported(const ir::ConvGeometry& g) {
  if (g.kernel.size() != 2 || g.kernel[0] != g.kernel[1] || g.strides[0] != g.strides[1])
    return false;
  if (g.dilations[0] != 1 || g.dilations[1] != 1) return false;
  const int64_t k = g.kernel[0], s = g.strides[0];
  return (k == 3 || k == 5 || k == 7) && (s == 1 || s == 2);
}

void depthwiseConv2d(const ir::ConvGeometry& g, int64_t batch, int64_t channels, int64_t height,
                     int64_t width, const float* x, const float* w, const float* bias,
                     const float* residual, const Activation& act, float* y, CpuIsa isa) {
  if (isa >= CpuIsa::kAvx512) {
    return detail::depthwiseConv2dAvx512(g, batch, channels, height, width, x, w, bias, residual,
                                         act, y);
  }
  const int64_t k = g.kernel[0];
  const bool s1 = g.strides[0] == 1;
  auto run = [&](auto kernel) {
    kernel(g, batch, channels, height, width, x, w, bias, residual, act, y);
  };
  if (k == 3) return s1 ? run(convolveAll<3, 1>) : run(convolveAll<3, 2>);
  if (k == 5) return s1 ? run(convolveAll<5, 1>) : run(convolveAll<5, 2>);
  return s1 ? run(convolveAll<7, 1>) : run(convolveAll<7, 2>);
}

}  // namespace kiln::cpu
