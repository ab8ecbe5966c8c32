// The BF16 Winograd kernel (nchwc_winograd_avx512.h): each transformed input vector rounded to
// BF16 as it is stored (its 16 channels as 8 pairs, one 32-bit lane each, the padding channels
// as zeros: a pair may hold the last real channel and a padding one), the weights as pairs
// (packNchwcWinogradBf16Weights), sums by vdpbf16ps in FP32: half the multiply instructions.
// The transforms and the products stay FP32. Compiled with AVX512_BF16 flags.
#include "backends/cpu/kernels/nchwc_winograd_avx512.h"

namespace kiln::cpu::detail {
namespace {

struct Bf16Products {
  using Word = uint32_t;
  static constexpr int64_t kWordsPerBlock = kBlock / 2;
  static int64_t packedChannels(int64_t inChannels) { return (inChannels + 1) / 2; }
  static inline void store(uint32_t* v, __m512 t, __mmask16 lanes) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(v),
                        (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_mov_ps(lanes, t)));
  }
  // acc[m][p] += w[c][m] . v_p[c] for the pairs c < count, tiles 8 words apart.
  template <int M, int P>
  static inline void accumulate(__m512 (&acc)[M][P], const uint32_t* v, const uint32_t* w,
                                int64_t count) {
    for (int64_t c = 0; c < count; ++c) {
      __m512bh wv[M];
#pragma GCC unroll 4
      for (int m = 0; m < M; ++m) wv[m] = (__m512bh)_mm512_loadu_si512(w + (c * M + m) * kBlock);
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) {
        const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(v[p * kWordsPerBlock + c]));
#pragma GCC unroll 4
        for (int m = 0; m < M; ++m) acc[m][p] = _mm512_dpbf16_ps(acc[m][p], wv[m], x);
      }
    }
  }
};

}  // namespace

void nchwcWinogradBf16Avx512(const NchwcConvArgs& a, const NchwcWinogradWeights& weights) {
  winogradConvolve<Bf16Products>(a, weights);
}

}  // namespace kiln::cpu::detail
