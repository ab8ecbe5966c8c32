// The AVX-512 few-output direct convolution (conv_few_outputs.h), stride 1, dilation 1.
// A block is C output channels (C <= 4) x N 16-float vectors of one output row, held in C * N
// accumulators (up to 24 of the 32 zmm registers). For each input channel and tap (ky, kx) the
// C weights are broadcast once, and each of the N input vectors (the input row at column offset
// kx, an unaligned load) feeds C FMAs: (C + N) loads per C * N FMAs, well within the two load
// ports. Input rows outside the image are skipped; columns outside it are read with masked loads
// (zero lanes) in the vectors at either border, plain loads elsewhere. Bias starts the
// accumulators; residual and activation are applied in registers before the one store. Output
// rows (of all images) are split over the thread pool; a thread computes all channel groups of
// a row in turn, while the row's Ci * KH input rows are in cache.
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/activation_simd.h"
#include "backends/cpu/kernels/conv_few_outputs.h"
#include "backends/cpu/kernels/conv_few_outputs_rows.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu::detail {
namespace {

using Float16Lanes = float __attribute__((vector_size(64)));
using Int16Lanes = int32_t __attribute__((vector_size(64)));

constexpr int64_t kLanes = 16;
constexpr int64_t kMaxKernelW = 16;  // bounds the per-block mask table (the rule allows up to 11)

__mmask16 firstLanes(int64_t count) {
  return count >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << std::max<int64_t>(count, 0)) - 1);
}

// Lanes j of a vector that starts at input column col whose column col + j lies in [0, width).
__mmask16 inRowLanes(int64_t col, int64_t width) {
  const int64_t lo = std::clamp<int64_t>(-col, 0, kLanes),
                hi = std::clamp<int64_t>(width - col, 0, kLanes);
  if (hi <= lo) return 0;
  return __mmask16(((1u << hi) - 1) & ~((1u << lo) - 1));
}

// Adds the residual, applies the activation and stores the lanes in m.
using FinishFn = void (*)(const Activation& act, __m512 v, const float* residual, float* out,
                          __mmask16 m);

template <ActivationKind A>
void finishVector(const Activation& act, __m512 v, const float* residual, float* out, __mmask16 m) {
  if (residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, residual));
  _mm512_mask_storeu_ps(out, m,
                        __m512(simd::activate<A, Float16Lanes, Int16Lanes>(act, Float16Lanes(v))));
}

struct Problem {
  int64_t height, width, inChannels, kernelH, kernelW, padTop, padLeft, outH, outW;
  const float* bias;
  Activation act;
  FinishFn finish;
};

// Where one output row of one image goes: image is the input image, weights the channel
// group's packed weights ([ci][ky][kx][c]); out and residual (may be null) point at the
// output-shaped image, first channel of the group.
struct RowJob {
  const float* image;
  const float* weights;
  const float* bias;  // the group's first bias value, or null
  const float* residual;
  float* out;
  int64_t oy;
};

// Output channels [0, C) x vectors [0, N) of row job.oy from column ox. Masked: some load of the
// block reaches outside the input row, so every load goes through a lane mask.
template <int C, int N, bool Masked>
void convolveBlock(const Problem& p, const RowJob& job, int64_t ox) {
  __m512 acc[C][N];
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) {
    const __m512 b = job.bias ? _mm512_set1_ps(job.bias[c]) : _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int n = 0; n < N; ++n) acc[c][n] = b;
  }
  __mmask16 masks[Masked ? kMaxKernelW * N : 1];
  if constexpr (Masked) {
    for (int64_t kx = 0; kx < p.kernelW; ++kx) {
      for (int n = 0; n < N; ++n)
        masks[kx * N + n] = inRowLanes(ox + n * kLanes + kx - p.padLeft, p.width);
    }
  }
  // Tap rows whose input row lies inside the image.
  const int64_t kyBegin = std::max<int64_t>(0, p.padTop - job.oy);
  const int64_t kyEnd = std::min<int64_t>(p.kernelH, p.height + p.padTop - job.oy);
  const int64_t planeSize = p.height * p.width, taps = p.kernelH * p.kernelW;
  for (int64_t ci = 0; ci < p.inChannels; ++ci) {
    const float* plane = job.image + ci * planeSize;
    const float* channelWeights = job.weights + ci * taps * C;
    for (int64_t ky = kyBegin; ky < kyEnd; ++ky) {
      // Input column of lane 0 of vector 0 at tap kx is ox - padLeft + kx.
      const float* src = plane + (job.oy - p.padTop + ky) * p.width + ox - p.padLeft;
      const float* w = channelWeights + ky * p.kernelW * C;
      for (int64_t kx = 0; kx < p.kernelW; ++kx) {
        __m512 wv[C];
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) wv[c] = _mm512_set1_ps(w[kx * C + c]);
#pragma GCC unroll 16
        for (int n = 0; n < N; ++n) {
          __m512 v;
          if constexpr (Masked)
            v = _mm512_maskz_loadu_ps(masks[kx * N + n], src + kx + n * kLanes);
          else
            v = _mm512_loadu_ps(src + kx + n * kLanes);
          // Keeps v in a register: otherwise GCC folds the load into each of the C FMAs, C loads
          // (most of them split over two cache lines) where one does.
          asm("" : "+v"(v));
#pragma GCC unroll 4
          for (int c = 0; c < C; ++c) acc[c][n] = _mm512_fmadd_ps(v, wv[c], acc[c][n]);
        }
      }
    }
  }
  const int64_t outSize = p.outH * p.outW;
  for (int c = 0; c < C; ++c) {
    for (int n = 0; n < N; ++n) {
      const int64_t col = ox + n * kLanes;
      const int64_t o = c * outSize + job.oy * p.outW + col;
      p.finish(p.act, acc[c][n], job.residual ? job.residual + o : nullptr, job.out + o,
               firstLanes(p.outW - col));
    }
  }
}

// One output row, in the register blocks of conv_few_outputs_rows.h.
template <int C, int N>
void convolveRow(const Problem& p, const RowJob& job) {
  forEachRowBlock<kLanes, N>(
      p.outW, p.width, p.kernelW, p.padLeft,
      [&]<int n, bool masked>(int64_t ox) { convolveBlock<C, n, masked>(p, job, ox); });
}

}  // namespace

void fewOutputConv2dAvx512(const ir::ConvGeometry& g, int64_t batch, int64_t height, int64_t width,
                           const float* x, const FewOutputWeights& w, const float* bias,
                           const float* residual, const Activation& act, float* y) {
  FinishFn finish = nullptr;
  simd::withActivationKind(act.kind,
                           [&](auto kind) { finish = &finishVector<decltype(kind)::value>; });
  const Problem p{height,         width,       w.inChannels, w.kernelH, w.kernelW, g.padsBegin[0],
                  g.padsBegin[1], g.output[0], g.output[1],  bias,      act,       finish};
  const std::vector<FewOutputGroup> groups = fewOutputGroups(w.outChannels);
  const int64_t inSize = w.inChannels * height * width, outSize = w.outChannels * p.outH * p.outW;
  const int64_t taps = w.kernelH * w.kernelW, planeOut = p.outH * p.outW;
  parallelFor(batch * p.outH, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t n = i / p.outH;
      for (const FewOutputGroup& grp : groups) {
        const int64_t offset = n * outSize + grp.first * planeOut;
        const RowJob job{x + n * inSize,
                         w.packed.get() + grp.first * w.inChannels * taps,
                         bias ? bias + grp.first : nullptr,
                         residual ? residual + offset : nullptr,
                         y + offset,
                         i % p.outH};
        switch (grp.count) {
          case 1:
            convolveRow<1, 16>(p, job);
            break;
          case 2:
            convolveRow<2, 12>(p, job);
            break;
          case 3:
            convolveRow<3, 8>(p, job);
            break;
          default:
            convolveRow<4, 6>(p, job);
            break;
        }
      }
    }
  });
}

}  // namespace kiln::cpu::detail
