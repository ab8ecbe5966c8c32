// sgemvPacked's strips for a B packed for the AVX-512 micro-kernel (32-column strips). Compiled
// with AVX-512 flags (the *_avx512.cpp rule in CMakeLists.txt) and called only for a B packed for
// that kernel, on a CPU that has AVX-512; includes no header with shared inline code.
#include <immintrin.h>

#include "backends/cpu/gemm/sgemv.h"

namespace kiln::cpu::detail {

// One strip at a time, so the weights are a single sequential stream, which the hardware
// prefetchers follow at the cache's full bandwidth; with two strips in flight, 256-bit loads or
// software prefetch, a product streamed from L3 ran at three quarters of that
// (docs/performance.md, "Matrix-vector products and LSTM").
namespace {

// GCC 12 warns that _mm512_cvtph_ps's own `_mm512_undefined_ps` pass-through "may be used
// uninitialized" (a GCC 12 false positive, as in sgemm_kernel_avx512.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// Loads 16 weights of a strip as float32: float32 as they are, halves widened (exactly).
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

template <typename T>
void strips(const T* packed, int64_t K, int64_t kc, int64_t padded, int64_t s0, int64_t s1,
            const float* xs, float* out) {
  constexpr int64_t kNR = 32;
  for (int64_t s = s0; s < s1; ++s) {
    __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
      const int64_t depth = kc < K - k0 ? kc : K - k0;
      const T* p = packed + k0 * padded + s * kNR * depth;
      // Each kc block sums apart and is then added, as the blocked GEMM rounds (see sgemv.cpp).
      __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
      for (int64_t k = 0; k < depth; ++k, p += kNR) {
        const __m512 x = _mm512_set1_ps(xs[k0 + k]);
        acc0 = _mm512_fmadd_ps(load16(p), x, acc0);
        acc1 = _mm512_fmadd_ps(load16(p + 16), x, acc1);
      }
      sum0 = _mm512_add_ps(sum0, acc0);
      sum1 = _mm512_add_ps(sum1, acc1);
    }
    float* o = out + (s - s0) * kNR;
    _mm512_storeu_ps(o, sum0);
    _mm512_storeu_ps(o + 16, sum1);
  }
}

#pragma GCC diagnostic pop

}  // namespace

void packedStripsAvx512(const float* packed, int64_t K, int64_t kc, int64_t padded, int64_t s0,
                        int64_t s1, const float* xs, float* out) {
  strips(packed, K, kc, padded, s0, s1, xs, out);
}

void packedHalfStripsAvx512(const uint16_t* packed, int64_t K, int64_t kc, int64_t padded,
                            int64_t s0, int64_t s1, const float* xs, float* out) {
  strips(packed, K, kc, padded, s0, s1, xs, out);
}

}  // namespace kiln::cpu::detail
