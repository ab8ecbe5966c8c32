// Weight packing, the rule for when the direct few-output convolution is used, its dispatch and
// the AVX2 kernel: the AVX-512 one (conv_few_outputs_avx512.cpp) on 8-float vectors and 16
// registers, so blocks are smaller (C x N <= 12 accumulators), borders use vmaskmovps, and the
// residual and activation are applied to each finished output row by applyEpilogue (in L1).
#include "backends/cpu/kernels/conv_few_outputs.h"
#include "backends/cpu/kernels/conv_few_outputs_rows.h"

#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

// Measured on Sapphire Rapids, one thread, 256x256 maps, CPU ms direct vs im2col + GEMM (AVX-512;
// AVX2 alike): 3x3..11x11 kernels win 2-10x up to 16 output channels (3 <- 32 5x5: 3.4 vs 30.9,
// 16 <- 64 3x3: 13.4 vs 28.3) and still 1.3-2x at 24 and 32, which the blocked NCHWc layout
// takes instead. 1x1 kernels (a plain GEMM, no im2col) win only up to 4 channels (4 <- 128:
// 1.6 vs 2.3; 8 <- 128: 4.5 vs 2.7).
constexpr int64_t kMaxOutputChannels = 16;
constexpr int64_t kMaxPointwiseOutputChannels = 4;
constexpr int64_t kMaxKernelSize = 11;

constexpr int64_t kLanes = 8;
constexpr int64_t kMaxKernelW = 16;  // bounds the per-block mask table

// All-ones in lanes j whose input column col + j lies in [0, width).
__m256i inRowLanes(int64_t col, int64_t width) {
  const __m256i columns = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(col)),
                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_and_si256(_mm256_cmpgt_epi32(columns, _mm256_set1_epi32(-1)),
                          _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(width)), columns));
}

struct Problem {
  int64_t height, width, inChannels, kernelH, kernelW, padTop, padLeft, outH, outW;
};

// One output row of one channel group: image, the group's packed weights and bias (may be
// null), and the group's first output channel at row oy.
struct RowJob {
  const float* image;
  const float* weights;
  const float* bias;
  float* out;
  int64_t oy;
};

// Output channels [0, C) x vectors [0, N) from column ox, bias included (as in the AVX-512 kernel).
template <int C, int N, bool Masked>
void convolveBlock(const Problem& p, const RowJob& job, int64_t ox) {
  __m256 acc[C][N];
  for (int c = 0; c < C; ++c) {
    const __m256 b = job.bias ? _mm256_set1_ps(job.bias[c]) : _mm256_setzero_ps();
    for (int n = 0; n < N; ++n) acc[c][n] = b;
  }
  __m256i masks[Masked ? kMaxKernelW * N : 1];
  if constexpr (Masked) {
    for (int64_t kx = 0; kx < p.kernelW; ++kx) {
      for (int n = 0; n < N; ++n)
        masks[kx * N + n] = inRowLanes(ox + n * kLanes + kx - p.padLeft, p.width);
    }
  }
  const int64_t kyBegin = std::max<int64_t>(0, p.padTop - job.oy);
  const int64_t kyEnd = std::min<int64_t>(p.kernelH, p.height + p.padTop - job.oy);
  const int64_t planeSize = p.height * p.width, taps = p.kernelH * p.kernelW;
  for (int64_t ci = 0; ci < p.inChannels; ++ci) {
    const float* plane = job.image + ci * planeSize;
    const float* channelWeights = job.weights + ci * taps * C;
    for (int64_t ky = kyBegin; ky < kyEnd; ++ky) {
      const float* src = plane + (job.oy - p.padTop + ky) * p.width + ox - p.padLeft;
      const float* w = channelWeights + ky * p.kernelW * C;
      for (int64_t kx = 0; kx < p.kernelW; ++kx) {
        __m256 wv[C];
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) wv[c] = _mm256_broadcast_ss(w + kx * C + c);
#pragma GCC unroll 8
        for (int n = 0; n < N; ++n) {
          __m256 v;
          if constexpr (Masked)
            v = _mm256_maskload_ps(src + kx + n * kLanes, masks[kx * N + n]);
          else
            v = _mm256_loadu_ps(src + kx + n * kLanes);
          asm(""
              : "+x"(v));  // one load feeding C FMAs, not folded into each (see the AVX-512 kernel)
#pragma GCC unroll 4
          for (int c = 0; c < C; ++c) acc[c][n] = _mm256_fmadd_ps(v, wv[c], acc[c][n]);
        }
      }
    }
  }
  const int64_t outSize = p.outH * p.outW;
  for (int c = 0; c < C; ++c) {
    for (int n = 0; n < N; ++n) {
      const int64_t col = ox + n * kLanes;
      float* dst = job.out + c * outSize + job.oy * p.outW + col;
      if (col + kLanes <= p.outW)
        _mm256_storeu_ps(dst, acc[c][n]);
      else
        _mm256_maskstore_ps(dst, inRowLanes(col, p.outW), acc[c][n]);
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

void fewOutputConv2dAvx2(const ir::ConvGeometry& g, int64_t batch, int64_t height, int64_t width,
                         const float* x, const FewOutputWeights& w, const float* bias,
                         const float* residual, const Activation& act, float* y) {
  const Problem p{height,         width,          w.inChannels, w.kernelH,  w.kernelW,
                  g.padsBegin[0], g.padsBegin[1], g.output[0],  g.output[1]};
  const std::vector<detail::FewOutputGroup> groups = detail::fewOutputGroups(w.outChannels);
  const int64_t inSize = w.inChannels * height * width, planeOut = p.outH * p.outW,
                outSize = w.outChannels * planeOut;
  const int64_t taps = w.kernelH * w.kernelW;
  const bool epilogue = act.kind != ActivationKind::kNone || residual;
  parallelFor(batch * p.outH, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t n = i / p.outH, oy = i % p.outH;
      for (const detail::FewOutputGroup& grp : groups) {
        const RowJob job{x + n * inSize, w.packed.get() + grp.first * w.inChannels * taps,
                         bias ? bias + grp.first : nullptr, y + n * outSize + grp.first * planeOut,
                         oy};
        switch (grp.count) {
          case 1:
            convolveRow<1, 8>(p, job);
            break;
          case 2:
            convolveRow<2, 5>(p, job);
            break;
          case 3:
            convolveRow<3, 3>(p, job);
            break;
          default:
            convolveRow<4, 2>(p, job);
            break;
        }
      }
      for (int64_t c = 0; c < w.outChannels && epilogue; ++c) {
        const int64_t o = n * outSize + c * planeOut + oy * p.outW;
        applyEpilogue(act, y + o, p.outW, 0.0f, residual ? residual + o : nullptr);
      }
    }
  });
}

}  // namespace

namespace detail {

std::vector<FewOutputGroup> fewOutputGroups(int64_t outChannels) {
  const int64_t groups = (outChannels + kFewOutputsChannelBlock - 1) / kFewOutputsChannelBlock;
  std::vector<FewOutputGroup> result;
  int64_t first = 0;
  for (int64_t i = 0; i < groups; ++i) {
    const int64_t count = outChannels / groups + (i < outChannels % groups ? 1 : 0);
    result.push_back({first, count});
    first += count;
  }
  return result;
}

}  // namespace detail

FewOutputWeights packFewOutputWeights(const float* w, int64_t outChannels, int64_t inChannels,
                                      int64_t kernelH, int64_t kernelW) {
  FewOutputWeights p{outChannels, inChannels, kernelH, kernelW, {}};
  const int64_t taps = kernelH * kernelW;
  std::shared_ptr<float> packed(new float[static_cast<size_t>(p.floats())],
                                std::default_delete<float[]>());
  p.packed = packed;
  for (const detail::FewOutputGroup& grp : detail::fewOutputGroups(outChannels)) {
    float* dst = packed.get() + grp.first * inChannels * taps;
    for (int64_t ci = 0; ci < inChannels; ++ci) {
      for (int64_t t = 0; t < taps; ++t) {
        for (int64_t c = 0; c < grp.count; ++c) {
          dst[(ci * taps + t) * grp.count + c] = w[((grp.first + c) * inChannels + ci) * taps + t];
        }
      }
    }
  }
  return p;
}

bool fewOutputWeightsUseful(int64_t group, int64_t outChannels, int64_t kernelRank, int64_t kernelH,
                            int64_t kernelW) {
  return group == 1 && kernelRank == 2 && outChannels >= 1 && outChannels <= kMaxOutputChannels &&
         kernelH >= 1 && kernelH <= kMaxKernelSize && kernelW >= 1 && kernelW <= kMaxKernelSize &&
         (kernelH * kernelW > 1 || outChannels <= kMaxPointwiseOutputChannels);
}

bool fewOutputConvPreferred(const ir::ConvGeometry& g, int64_t group, int64_t inChannels,
                            int64_t outChannels) {
  if (g.kernel.size() != 2 || inChannels < 1) return false;
  if (!fewOutputWeightsUseful(group, outChannels, 2, g.kernel[0], g.kernel[1])) return false;
  for (size_t d = 0; d < 2; ++d) {
    if (g.strides[d] != 1 || g.dilations[d] != 1 || g.output[d] < 1) return false;
  }
  return true;
}

void fewOutputConv2d(const ir::ConvGeometry& g, int64_t batch, int64_t height, int64_t width,
                     const float* x, const FewOutputWeights& w, const float* bias,
                     const float* residual, const Activation& act, float* y, CpuIsa isa) {
  if (isa >= CpuIsa::kAvx512)
    return detail::fewOutputConv2dAvx512(g, batch, height, width, x, w, bias, residual, act, y);
  fewOutputConv2dAvx2(g, batch, height, width, x, w, bias, residual, act, y);
}

}  // namespace kiln::cpu
