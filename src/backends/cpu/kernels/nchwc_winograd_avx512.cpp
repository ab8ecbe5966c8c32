// The FP32 Winograd kernel (nchwc_winograd_avx512.h): V in floats, sums by FMA with a broadcast
// input channel; and the scratch sizes of both builds.
#include "backends/cpu/kernels/nchwc_winograd_avx512.h"

namespace kiln::cpu::detail {
namespace {

struct Fp32Products {
  using Word = float;
  static constexpr int64_t kWordsPerBlock = kBlock;
  static int64_t packedChannels(int64_t inChannels) { return inChannels; }
  // X's padding channels may hold anything; the sums never read them (packedChannels stops at
  // the real ones), so the lanes need no masking here.
  static inline void store(float* v, __m512 t, __mmask16) { _mm512_storeu_ps(v, t); }
  template <int M, int P>
  static inline void accumulate(__m512 (&acc)[M][P], const float* v, const float* w,
                                int64_t count) {
    multiplyStrided<M, P, kBlock>(acc, v, w, count);
  }
};

}  // namespace

uint64_t nchwcWinogradScratchBytes(const NchwcConvShape& s, const NchwcWinogradWeights& weights,
                                   int threads) {
  const PassScratch p = largestPassScratch(s, weights, threads);
  return static_cast<uint64_t>(p.inputWords + p.parts * p.productFloats) * sizeof(float);
}

void nchwcWinogradAvx512(const NchwcConvArgs& a, const NchwcWinogradWeights& weights) {
  winogradConvolve<Fp32Products>(a, weights);
}

}  // namespace kiln::cpu::detail
