// Pieces shared by the AVX-512 NchwcConv kernels (nchwc_conv_avx512.cpp,
// nchwc_conv_depthwise_avx512.cpp and nchwc_winograd_avx512.cpp): the output lane mask, the part
// of the epilogue done in registers and the channel-sum micro-kernel. Include only from
// *_avx512.cpp files; everything is in an unnamed namespace, so no AVX-512 code is shared with
// the baseline build.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "backends/cpu/activation.h"

namespace kiln::cpu::detail {
namespace {

using Float16Lanes = float __attribute__((vector_size(64)));

constexpr int64_t kBlock = 16;

// The lanes of output block b that hold real channels (of `channels`).
inline __mmask16 laneMask(int64_t b, int64_t channels) {
  const int64_t valid = channels - b * kBlock;
  return valid >= kBlock ? __mmask16(0xFFFF) : __mmask16((1u << std::max<int64_t>(valid, 0)) - 1);
}

// The part of the activation done in registers: a clamp to [lo, hi] (Relu, Clip), or nothing;
// `rest` says whether the activation still has to run over the stored values.
struct RegisterEpilogue {
  bool clamp, rest;
  __m512 lo, hi;
  explicit RegisterEpilogue(const Activation& act)
      : clamp(act.kind == ActivationKind::kRelu || act.kind == ActivationKind::kClip),
        rest(!clamp && act.kind != ActivationKind::kNone),
        lo(_mm512_set1_ps(act.kind == ActivationKind::kRelu ? 0.0f
                          : act.kind == ActivationKind::kClip
                              ? act.alpha
                              : -std::numeric_limits<float>::infinity())),
        hi(_mm512_set1_ps(act.kind == ActivationKind::kClip
                              ? act.beta
                              : std::numeric_limits<float>::infinity())) {}
  inline __m512 clamped(__m512 v) const {
    // The comparisons are false for NaN, which thus passes through as in Relu and Clip.
    Float16Lanes f(v);
    f = f < Float16Lanes(lo) ? Float16Lanes(lo) : f;
    f = f > Float16Lanes(hi) ? Float16Lanes(hi) : f;
    return __m512(f);
  }
  // v + residual (its padding lanes, which may hold anything, read as zero), then the clamp.
  inline __m512 apply(__m512 v, const float* residual, __mmask16 lanes) const {
    if (residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(lanes, residual));
    return clamp ? clamped(v) : v;
  }
};

// The most pixels (or Winograd tiles) a register tile of M output blocks has: M * P
// accumulators, M weight vectors and a broadcast fit the 32 vector registers.
constexpr int maxRegisterPixels(int64_t M) { return M >= 4 ? 6 : M == 3 ? 8 : 12; }

// The start of a register tile of output blocks b0 .. b0 + M - 1 x P pixels: each sum starts
// from its bias plus the residual, the tile's residual values at z (block m at z + m * blockStride,
// pixel p 16 floats after pixel p - 1), or null. The residual is read here, before any store, so
// that Y may share Z's storage (the memory plan computes a conv in place of a residual that dies
// there). Z's padding lanes may hold anything: they read as zero.
template <int M, int P>
inline void startFromBias(__m512 (&acc)[M][P], const float* bias, const float* z,
                          int64_t blockStride, int64_t b0, int64_t channels) {
#pragma GCC unroll 4
  for (int m = 0; m < M; ++m) {
    const __m512 b = _mm512_loadu_ps(bias + (b0 + m) * kBlock);
    if (z) {
      const __mmask16 lanes = laneMask(b0 + m, channels);
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p)
        acc[m][p] =
            _mm512_add_ps(b, _mm512_maskz_loadu_ps(lanes, z + m * blockStride + p * kBlock));
    } else {
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) acc[m][p] = b;
    }
  }
}

// Stores a register tile at y (block m at y + m * blockStride), clamped where epi says so.
template <int M, int P>
inline void storeTile(const RegisterEpilogue& epi, const __m512 (&acc)[M][P], float* y,
                      int64_t blockStride) {
#pragma GCC unroll 4
  for (int m = 0; m < M; ++m) {
    float* row = y + m * blockStride;
    if (epi.clamp) {
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) _mm512_storeu_ps(row + p * kBlock, epi.clamped(acc[m][p]));
    } else {
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) _mm512_storeu_ps(row + p * kBlock, acc[m][p]);
    }
  }
}

// acc[m][p] += w[ci][m] * x0[p * S + ci] for ci < count, weights [ci][M][16]: P pixels (or
// Winograd tiles) S floats apart, read through one pointer with constant offsets (P separate
// pointers would not fit the general-purpose registers).
template <int M, int P, int S>
inline void multiplyStrided(__m512 (&acc)[M][P], const float* x0, const float* w, int64_t count) {
  for (int64_t ci = 0; ci < count; ++ci) {
    __m512 wv[M];
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m) wv[m] = _mm512_loadu_ps(w + (ci * M + m) * kBlock);
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p) {
      const __m512 v = _mm512_set1_ps(x0[p * S + ci]);
#pragma GCC unroll 4
      for (int m = 0; m < M; ++m) acc[m][p] = _mm512_fmadd_ps(wv[m], v, acc[m][p]);
    }
  }
}

}  // namespace
}  // namespace kiln::cpu::detail
