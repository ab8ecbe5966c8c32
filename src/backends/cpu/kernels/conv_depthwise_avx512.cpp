// The AVX-512 depthwise K x K kernel (conv_depthwise.h). Each channel is copied into S x S
// zero-padded phase planes: plane (pr, pc) holds padded rows pr, pr + S, ... and columns pc,
// pc + S, ..., so output (oy, ox) reads tap (ky, kx) at row oy + ky / S, column ox + kx / S of
// plane (ky % S, kx % S): 16 neighbouring outputs read 16 contiguous floats, for stride 2 too.
// Outputs are computed 16 columns x 4 rows at a time, an input vector loaded once for every
// output row it feeds; bias, residual and activation are applied in registers before the one
// store. Channels are split over the thread pool. When a row is much narrower than a vector (7x7
// maps), the plane is treated as one flat row instead (output q = oy * planeWidth + ox), the junk
// columns between rows computed and dropped, so a 7x7 map takes 4 vectors instead of 7.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "backends/cpu/activation_simd.h"
#include "backends/cpu/kernels/conv_depthwise.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu::detail {
namespace {

using Float16Lanes = float __attribute__((vector_size(64)));
using Int16Lanes = int32_t __attribute__((vector_size(64)));

constexpr int64_t kLanes = 16;
constexpr int kRowBlock = 4;  // output rows computed together

__mmask16 firstLanes(int64_t count) {
  return count >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << std::max<int64_t>(count, 0)) - 1);
}

struct PlaneLayout {
  int64_t rows = 0;    // rows per plane
  int64_t width = 0;   // floats per plane row
  int64_t stride = 0;  // floats from one plane to the next: rows * width plus slack for over-reads
};

template <int K, int S>
PlaneLayout planeLayout(const ir::ConvGeometry& g, int64_t height, int64_t width) {
  PlaneLayout p;
  constexpr int64_t reach = (K - 1) / S;  // farthest tap offset within a plane
  p.rows = std::max((height + g.padsBegin[0] + S - 1) / S, g.output[0] + reach);
  p.width = std::max((width + g.padsBegin[1] + S - 1) / S, g.output[1] + reach);
  // A flat block started at the last output reads up to kRowBlock * kLanes - 1 + reach past the
  // plane's end (a row-mode vector less).
  p.stride = (p.rows * p.width + kRowBlock * kLanes + reach + kLanes - 1) / kLanes * kLanes;
  return p;
}

// Copies one input row (width floats) into plane row `row` of the S column phases of row parity
// pr. Only the data positions are written: they are the same for every channel, so the padding
// around them stays as zeroed when the buffer was made.
template <int S>
void fillPlaneRow(const float* src, int64_t width, int64_t padLeft, const PlaneLayout& p,
                  float* planesOfParity, int64_t row) {
  if constexpr (S == 1) {
    float* dst = planesOfParity + row * p.width + padLeft;
    for (int64_t i = 0; i < width; i += kLanes) {
      const __mmask16 m = firstLanes(width - i);
      _mm512_mask_storeu_ps(dst + i, m, _mm512_maskz_loadu_ps(m, src + i));
    }
  } else {
    static_assert(S == 2);
    // Input column ix lands in padded column ix + padLeft: even ix go to phase padLeft % 2 from
    // column padLeft / 2, odd ix to the other phase from column (padLeft + 1) / 2.
    const int64_t evens = (width + 1) / 2, odds = width / 2;
    float* evenDst = planesOfParity + (padLeft % 2) * p.stride + row * p.width + padLeft / 2;
    float* oddDst =
        planesOfParity + ((padLeft + 1) % 2) * p.stride + row * p.width + (padLeft + 1) / 2;
    const __m512i evenIndex =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i oddIndex =
        _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    for (int64_t m = 0; m < evens; m += kLanes) {
      const __m512 lo = _mm512_maskz_loadu_ps(firstLanes(width - 2 * m), src + 2 * m);
      const __m512 hi =
          _mm512_maskz_loadu_ps(firstLanes(width - 2 * m - kLanes), src + 2 * m + kLanes);
      _mm512_mask_storeu_ps(evenDst + m, firstLanes(evens - m),
                            _mm512_permutex2var_ps(lo, evenIndex, hi));
      _mm512_mask_storeu_ps(oddDst + m, firstLanes(odds - m),
                            _mm512_permutex2var_ps(lo, oddIndex, hi));
    }
  }
}

// Copies one channel into its S * S phase planes (plane index pr * S + pc); rows that are all
// padding are left as they are (zero).
template <int S>
void fillPlanes(const ir::ConvGeometry& g, int64_t height, int64_t width, const float* x,
                const PlaneLayout& p, float* planes) {
  const int64_t padTop = g.padsBegin[0], padLeft = g.padsBegin[1];
  for (int64_t iy = 0; iy < height; ++iy) {
    const int64_t r = iy + padTop;  // padded row: parity r % S, plane row r / S
    fillPlaneRow<S>(x + iy * width, width, padLeft, p, planes + (r % S) * S * p.stride, r / S);
  }
}

// R output rows (rowStep floats apart in plane coordinates) x 16 columns at plane offset `at`:
// out[r] = bias + sum over taps. Virtual input row t = r * S + ky is plane row parity t % S,
// row t / S, so each (t, kx) vector is loaded once and fed to every output row that uses it.
template <int K, int S, int R>
inline void convolveBlock(const float* planes, const PlaneLayout& p, int64_t at, int64_t rowStep,
                          const __m512* taps, __m512 bias, __m512* out) {
  for (int r = 0; r < R; ++r) out[r] = bias;
#pragma GCC unroll 16
  for (int t = 0; t < (R - 1) * S + K; ++t) {
#pragma GCC unroll 8
    for (int kx = 0; kx < K; ++kx) {
      const float* src =
          planes + ((t % S) * S + kx % S) * p.stride + at + (t / S) * rowStep + kx / S;
      const __m512 v = _mm512_loadu_ps(src);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int ky = t - r * S;
        if (ky >= 0 && ky < K) out[r] = _mm512_fmadd_ps(v, taps[ky * K + kx], out[r]);
      }
    }
  }
}

// N neighbouring vectors of a flat map at plane offset q (independent FMA chains).
template <int K, int S, int N>
inline void convolveFlatBlock(const float* planes, const PlaneLayout& p, int64_t q,
                              const __m512* taps, __m512 bias, __m512* out) {
  for (int n = 0; n < N; ++n) out[n] = bias;
#pragma GCC unroll 8
  for (int ky = 0; ky < K; ++ky) {
#pragma GCC unroll 8
    for (int kx = 0; kx < K; ++kx) {
      const float* src =
          planes + ((ky % S) * S + kx % S) * p.stride + q + (ky / S) * p.width + kx / S;
#pragma GCC unroll 4
      for (int n = 0; n < N; ++n)
        out[n] = _mm512_fmadd_ps(_mm512_loadu_ps(src + n * kLanes), taps[ky * K + kx], out[n]);
    }
  }
}

template <ActivationKind A>
inline __m512 finish(const Activation& act, __m512 v, const float* residual, __mmask16 m) {
  if (residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, residual));
  return __m512(simd::activate<A, Float16Lanes, Int16Lanes>(act, Float16Lanes(v)));
}

struct ChannelJob {
  const float* x;  // input plane
  float bias;
  const float* residual;  // output-shaped plane or null
  float* y;               // output plane
};

template <int K, int S, ActivationKind A>
void convolveRows(const ir::ConvGeometry& g, const Activation& act, const PlaneLayout& p,
                  const float* planes, const __m512* taps, const ChannelJob& job) {
  const int64_t outH = g.output[0], outW = g.output[1];
  const __m512 bias = _mm512_set1_ps(job.bias);
  int64_t oy = 0;
  __m512 acc[kRowBlock];
  for (; oy + kRowBlock <= outH; oy += kRowBlock) {
    for (int64_t ox = 0; ox < outW; ox += kLanes) {
      convolveBlock<K, S, kRowBlock>(planes, p, oy * p.width + ox, p.width, taps, bias, acc);
      const __mmask16 m = firstLanes(outW - ox);
      for (int r = 0; r < kRowBlock; ++r) {
        const int64_t o = (oy + r) * outW + ox;
        _mm512_mask_storeu_ps(job.y + o, m,
                              finish<A>(act, acc[r], job.residual ? job.residual + o : nullptr, m));
      }
    }
  }
  for (; oy < outH; ++oy) {
    for (int64_t ox = 0; ox < outW; ox += kLanes) {
      convolveBlock<K, S, 1>(planes, p, oy * p.width + ox, p.width, taps, bias, acc);
      const __mmask16 m = firstLanes(outW - ox);
      const int64_t o = oy * outW + ox;
      _mm512_mask_storeu_ps(job.y + o, m,
                            finish<A>(act, acc[0], job.residual ? job.residual + o : nullptr, m));
    }
  }
}

// The whole map as one flat row of outH * p.width outputs (junk where ox >= outW), written to
// `flat`, then each output row taken from it through the epilogue.
template <int K, int S, ActivationKind A>
void convolveFlat(const ir::ConvGeometry& g, const Activation& act, const PlaneLayout& p,
                  const float* planes, const __m512* taps, const ChannelJob& job, float* flat) {
  const int64_t outH = g.output[0], outW = g.output[1];
  const int64_t total = outH * p.width;
  const __m512 bias = _mm512_set1_ps(job.bias);
  __m512 acc[kRowBlock];
  // Whole blocks of kRowBlock vectors, the last one running past the map (buffer and plane slack
  // are sized for it), so every chunk has kRowBlock independent FMA chains.
  for (int64_t q = 0; q < total; q += kRowBlock * kLanes) {
    convolveFlatBlock<K, S, kRowBlock>(planes, p, q, taps, bias, acc);
    for (int n = 0; n < kRowBlock; ++n) _mm512_storeu_ps(flat + q + n * kLanes, acc[n]);
  }
  const __mmask16 m = firstLanes(outW);
  for (int64_t oy = 0; oy < outH; ++oy) {
    const int64_t o = oy * outW;
    const __m512 v = _mm512_maskz_loadu_ps(m, flat + oy * p.width);
    _mm512_mask_storeu_ps(job.y + o, m,
                          finish<A>(act, v, job.residual ? job.residual + o : nullptr, m));
  }
}

template <int K, int S, ActivationKind A>
void convolveAll(const ir::ConvGeometry& g, int64_t batch, int64_t channels, int64_t height,
                 int64_t width, const float* x, const float* w, const float* bias,
                 const float* residual, const Activation& act, float* y) {
  const PlaneLayout p = planeLayout<K, S>(g, height, width);
  const int64_t outH = g.output[0], outW = g.output[1];
  const int64_t inSize = height * width, outSize = outH * outW;
  // Flat when it takes clearly fewer vectors than row by row (only maps narrower than a vector).
  const int64_t rowVectors = outH * ((outW + kLanes - 1) / kLanes);
  const int64_t flatVectors = (outH * p.width + kLanes - 1) / kLanes;
  const bool flat = outW < kLanes && flatVectors < rowVectors;
  parallelFor(batch * channels, [&](int64_t begin, int64_t end) {
    // Zeroed once: fillPlanes writes only data positions, so padding and slack stay zero.
    const int64_t blockFloats = kRowBlock * kLanes;
    const int64_t flatFloats =
        flat ? (outH * p.width + blockFloats - 1) / blockFloats * blockFloats : 0;
    std::vector<float> buffer(static_cast<size_t>(S * S * p.stride + flatFloats), 0.0f);
    float* planes = buffer.data();
    float* flatOut = planes + S * S * p.stride;
    __m512 taps[K * K];
    for (int64_t i = begin; i < end; ++i) {
      const int64_t c = i % channels;
      for (int t = 0; t < K * K; ++t) taps[t] = _mm512_set1_ps(w[c * K * K + t]);
      const ChannelJob job{x + i * inSize, bias ? bias[c] : 0.0f,
                           residual ? residual + i * outSize : nullptr, y + i * outSize};
      fillPlanes<S>(g, height, width, job.x, p, planes);
      if (flat)
        convolveFlat<K, S, A>(g, act, p, planes, taps, job, flatOut);
      else
        convolveRows<K, S, A>(g, act, p, planes, taps, job);
    }
  });
}

template <int K, int S>
void dispatchActivation(const ir::ConvGeometry& g, int64_t batch, int64_t channels, int64_t height,
                        int64_t width, const float* x, const float* w, const float* bias,
                        const float* residual, const Activation& act, float* y) {
  simd::withActivationKind(act.kind, [&](auto kind) {
    convolveAll<K, S, decltype(kind)::value>(g, batch, channels, height, width, x, w, bias,
                                             residual, act, y);
  });
}

}  // namespace

void depthwiseConv2dAvx512(const ir::ConvGeometry& g, int64_t batch, int64_t channels,
                           int64_t height, int64_t width, const float* x, const float* w,
                           const float* bias, const float* residual, const Activation& act,
                           float* y) {
  const int64_t k = g.kernel[0];
  const bool s1 = g.strides[0] == 1;
  auto run = [&](auto kernel) {
    kernel(g, batch, channels, height, width, x, w, bias, residual, act, y);
  };
  if (k == 3) return s1 ? run(dispatchActivation<3, 1>) : run(dispatchActivation<3, 2>);
  if (k == 5) return s1 ? run(dispatchActivation<5, 1>) : run(dispatchActivation<5, 2>);
  return s1 ? run(dispatchActivation<7, 1>) : run(dispatchActivation<7, 2>);
}

}  // namespace kiln::cpu::detail
