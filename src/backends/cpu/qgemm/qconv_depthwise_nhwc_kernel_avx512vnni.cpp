// The quad rows and the output rows of qconvDepthwiseNhwc (qconv_depthwise_nhwc.h).
#include <immintrin.h>

#include "backends/cpu/qgemm/qconv_depthwise_nhwc_kernel.h"
#include "backends/cpu/qgemm/requant_avx512.h"

namespace kiln::cpu {

namespace {

// The kernel's width as a template argument: the taps stay in registers (an array of them went
// through the stack, and its zeroing stalled every load of it).
template <int Width>
void quadRow(const QConvDepthwiseNhwcProblem& p, int64_t iy, const uint8_t* zeroRow,
             uint8_t* quads) {
  const int64_t lanes = depthwiseNhwcLanes(p.channels), groups = lanes / 16;
  const __mmask16 tail = firstLanes(p.channels - (groups - 1) * 16);
  const uint8_t* row = p.x + iy * p.iw * p.channels;
  auto source = [&](int64_t ox, int64_t kx) {
    const int64_t ix = ox * p.sw - p.padLeft + kx * p.dw;
    return ix >= 0 && ix < p.iw ? row + ix * p.channels : zeroRow;
  };
  // Taps past the kernel's width have weight 0: any byte does.
  auto tap = [](const uint8_t* src, __mmask16 m) { return _mm_maskz_loadu_epi8(m, src); };
  const int64_t blocks = depthwiseNhwcBlocks(p.channels);
  const __m256i zero = _mm256_setzero_si256();
  for (int64_t ox = 0; ox < p.ow; ++ox) {
    const uint8_t* s0 = source(ox, 0);
    const uint8_t* s1 = Width > 1 ? source(ox, 1) : s0;
    const uint8_t* s2 = Width > 2 ? source(ox, 2) : s0;
    const uint8_t* s3 = Width > 3 ? source(ox, 3) : s0;
    __m256i* block = reinterpret_cast<__m256i*>(quads + ox * lanes * 4);
    for (int64_t b = 0; b < blocks; ++b, block += 4) {  // 32 channels, the permuted order
      const int64_t c = b * 32;
      auto tap32 = [&](const uint8_t* src) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + c));
      };
      const __m256i t0 = tap32(s0), t1 = Width > 1 ? tap32(s1) : zero,
                    t2 = Width > 2 ? tap32(s2) : zero, t3 = Width > 3 ? tap32(s3) : zero;
      const __m256i abLow = _mm256_unpacklo_epi8(t0, t1), abHigh = _mm256_unpackhi_epi8(t0, t1);
      const __m256i cdLow = _mm256_unpacklo_epi8(t2, t3), cdHigh = _mm256_unpackhi_epi8(t2, t3);
      _mm256_storeu_si256(block, _mm256_unpacklo_epi16(abLow, cdLow));        // 0-3, 16-19
      _mm256_storeu_si256(block + 1, _mm256_unpackhi_epi16(abLow, cdLow));    // 4-7, 20-23
      _mm256_storeu_si256(block + 2, _mm256_unpacklo_epi16(abHigh, cdHigh));  // 8-11, 24-27
      _mm256_storeu_si256(block + 3, _mm256_unpackhi_epi16(abHigh, cdHigh));  // 12-15, 28-31
    }
    __m128i* out = reinterpret_cast<__m128i*>(quads + ox * lanes * 4) + blocks * 8;
    for (int64_t g = blocks * 2; g < groups; ++g, out += 4) {
      const __mmask16 m = g + 1 < groups ? __mmask16(0xffff) : tail;
      const int64_t c = g * 16;
      const __m128i t0 = tap(s0 + c, m);
      const __m128i t1 = Width > 1 ? tap(s1 + c, m) : _mm_setzero_si128();
      const __m128i t2 = Width > 2 ? tap(s2 + c, m) : _mm_setzero_si128();
      const __m128i t3 = Width > 3 ? tap(s3 + c, m) : _mm_setzero_si128();
      const __m128i abLow = _mm_unpacklo_epi8(t0, t1), abHigh = _mm_unpackhi_epi8(t0, t1);
      const __m128i cdLow = _mm_unpacklo_epi8(t2, t3), cdHigh = _mm_unpackhi_epi8(t2, t3);
      _mm_storeu_si128(out, _mm_unpacklo_epi16(abLow, cdLow));        // channels 0-3
      _mm_storeu_si128(out + 1, _mm_unpackhi_epi16(abLow, cdLow));    // 4-7
      _mm_storeu_si128(out + 2, _mm_unpacklo_epi16(abHigh, cdHigh));  // 8-11
      _mm_storeu_si128(out + 3, _mm_unpackhi_epi16(abHigh, cdHigh));  // 12-15
    }
  }
}

}  // namespace

void depthwiseNhwcQuadRowAvx512Vnni(const QConvDepthwiseNhwcProblem& p, int64_t iy,
                                    const uint8_t* zeroRow, uint8_t* quads) {
  switch (p.kw) {
    case 1:
      return quadRow<1>(p, iy, zeroRow, quads);
    case 2:
      return quadRow<2>(p, iy, zeroRow, quads);
    case 3:
      return quadRow<3>(p, iy, zeroRow, quads);
    default:
      return quadRow<4>(p, iy, zeroRow, quads);
  }
}

namespace {

inline void storeLanes(uint8_t* y, __mmask16 m, __m128i bytes) {
  if (m == 0xffff) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y), bytes);
  } else {
    _mm_mask_storeu_epi8(y, m, bytes);
  }
}

// The two 16-lane groups of a 32-channel block requantized (bytes in the permuted order,
// depthwiseNhwcLaneOf) stored as channels 0-31: dwords (a0 a1 a2 a3), (b0 b1 b2 b3) hold channels
// (0-3, 16-19, 4-7, 20-23), (8-11, 24-27, 12-15, 28-31).
inline void storeBlock(uint8_t* y, __m128i a, __m128i b) {
  const __m128 fa = _mm_castsi128_ps(a), fb = _mm_castsi128_ps(b);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y),
                   _mm_castps_si128(_mm_shuffle_ps(fa, fb, _MM_SHUFFLE(2, 0, 2, 0))));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 16),
                   _mm_castps_si128(_mm_shuffle_ps(fa, fb, _MM_SHUFFLE(3, 1, 3, 1))));
}

// Output row y's channels [32b, 32b + 32): two 16-lane groups, four outputs at a time.
void outputBlock(const QConvDepthwiseNhwcProblem& p, const uint8_t* const* rows,
                 const int64_t* rowSteps, int64_t b, const RequantVectors& r, uint8_t* y) {
  const QGemmOutput& o = p.output;
  const int64_t c0 = b * 32, wRow = depthwiseNhwcLanes(p.channels) * 4, c = p.channels;
  // The groups' lanes: channels (0-3, 16-19, 4-7, 20-23) and (8-11, 24-27, 12-15, 28-31).
  const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second =
      _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  const __m512i addLow = _mm512_loadu_si512(p.channelAdd + c0),
                addHigh = _mm512_loadu_si512(p.channelAdd + c0 + 16);
  const __m512i addA = _mm512_permutex2var_epi32(addLow, first, addHigh),
                addB = _mm512_permutex2var_epi32(addLow, second, addHigh);
  __m512 scaleA = _mm512_set1_ps(o.scale[0]), scaleB = scaleA;
  if (o.scaleCount > 1) {
    const __m512 low = _mm512_loadu_ps(o.scale + c0), high = _mm512_loadu_ps(o.scale + c0 + 16);
    scaleA = _mm512_permutex2var_ps(low, first, high);
    scaleB = _mm512_permutex2var_ps(low, second, high);
  }
  const int8_t* w = p.weights + c0 * 4;
  uint8_t* yb = y + c0;
  int64_t ox = 0;
  for (; ox + 4 <= p.ow; ox += 4) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    __m512i b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      const __m512i wa = _mm512_loadu_si512(w + ky * wRow),
                    wb = _mm512_loadu_si512(w + ky * wRow + 64);
      const int64_t step = rowSteps[ky];
      const uint8_t* q = rows[ky] + ox * step + c0 * 4;
      a0 = _mm512_dpbusd_epi32(a0, _mm512_loadu_si512(q), wa);
      b0 = _mm512_dpbusd_epi32(b0, _mm512_loadu_si512(q + 64), wb);
      a1 = _mm512_dpbusd_epi32(a1, _mm512_loadu_si512(q + step), wa);
      b1 = _mm512_dpbusd_epi32(b1, _mm512_loadu_si512(q + step + 64), wb);
      a2 = _mm512_dpbusd_epi32(a2, _mm512_loadu_si512(q + 2 * step), wa);
      b2 = _mm512_dpbusd_epi32(b2, _mm512_loadu_si512(q + 2 * step + 64), wb);
      a3 = _mm512_dpbusd_epi32(a3, _mm512_loadu_si512(q + 3 * step), wa);
      b3 = _mm512_dpbusd_epi32(b3, _mm512_loadu_si512(q + 3 * step + 64), wb);
    }
    storeBlock(yb + ox * c, requantLanes(a0, addA, scaleA, r), requantLanes(b0, addB, scaleB, r));
    storeBlock(yb + (ox + 1) * c, requantLanes(a1, addA, scaleA, r),
               requantLanes(b1, addB, scaleB, r));
    storeBlock(yb + (ox + 2) * c, requantLanes(a2, addA, scaleA, r),
               requantLanes(b2, addB, scaleB, r));
    storeBlock(yb + (ox + 3) * c, requantLanes(a3, addA, scaleA, r),
               requantLanes(b3, addB, scaleB, r));
  }
  for (; ox < p.ow; ++ox) {
    __m512i a = _mm512_setzero_si512(), bsum = a;
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      const uint8_t* q = rows[ky] + ox * rowSteps[ky] + c0 * 4;
      a = _mm512_dpbusd_epi32(a, _mm512_loadu_si512(q), _mm512_loadu_si512(w + ky * wRow));
      bsum = _mm512_dpbusd_epi32(bsum, _mm512_loadu_si512(q + 64),
                                 _mm512_loadu_si512(w + ky * wRow + 64));
    }
    storeBlock(yb + ox * c, requantLanes(a, addA, scaleA, r), requantLanes(bsum, addB, scaleB, r));
  }
}

}  // namespace

void depthwiseNhwcOutputRowAvx512Vnni(const QConvDepthwiseNhwcProblem& p,
                                      const uint8_t* const* rows, const int64_t* rowSteps,
                                      uint8_t* y) {
  const int64_t lanes = depthwiseNhwcLanes(p.channels), groups = lanes / 16;
  const __mmask16 tail = firstLanes(p.channels - (groups - 1) * 16);
  const QGemmOutput& o = p.output;
  const RequantVectors r = requantVectors(static_cast<float>(o.lowest - o.zeroPoint),
                                          static_cast<float>(o.highest - o.zeroPoint), o.zeroPoint);
  const int64_t wRow = lanes * 4, c = p.channels, blocks = depthwiseNhwcBlocks(p.channels);
  for (int64_t b = 0; b < blocks; ++b) outputBlock(p, rows, rowSteps, b, r, y);
  for (int64_t g = blocks * 2; g < groups; ++g) {
    const __mmask16 m = g + 1 < groups ? __mmask16(0xffff) : tail;
    const __m512i add = _mm512_maskz_loadu_epi32(m, p.channelAdd + g * 16);
    const __m512 scale =
        o.scaleCount > 1 ? _mm512_maskz_loadu_ps(m, o.scale + g * 16) : _mm512_set1_ps(o.scale[0]);
    const int8_t* w = p.weights + g * 64;
    uint8_t* yg = y + g * 16;
    int64_t ox = 0;
    // Four outputs share each kernel row's weights.
    for (; ox + 4 <= p.ow; ox += 4) {
      __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t ky = 0; ky < p.kh; ++ky) {
        const __m512i wv = _mm512_loadu_si512(w + ky * wRow);
        const int64_t step = rowSteps[ky];
        const uint8_t* q = rows[ky] + ox * step + g * 64;
        a0 = _mm512_dpbusd_epi32(a0, _mm512_loadu_si512(q), wv);
        a1 = _mm512_dpbusd_epi32(a1, _mm512_loadu_si512(q + step), wv);
        a2 = _mm512_dpbusd_epi32(a2, _mm512_loadu_si512(q + 2 * step), wv);
        a3 = _mm512_dpbusd_epi32(a3, _mm512_loadu_si512(q + 3 * step), wv);
      }
      storeLanes(yg + ox * c, m, requantLanes(a0, add, scale, r));
      storeLanes(yg + (ox + 1) * c, m, requantLanes(a1, add, scale, r));
      storeLanes(yg + (ox + 2) * c, m, requantLanes(a2, add, scale, r));
      storeLanes(yg + (ox + 3) * c, m, requantLanes(a3, add, scale, r));
    }
    for (; ox < p.ow; ++ox) {
      __m512i a = _mm512_setzero_si512();
      for (int64_t ky = 0; ky < p.kh; ++ky) {
        a = _mm512_dpbusd_epi32(a, _mm512_loadu_si512(rows[ky] + ox * rowSteps[ky] + g * 64),
                                _mm512_loadu_si512(w + ky * wRow));
      }
      storeLanes(yg + ox * c, m, requantLanes(a, add, scale, r));
    }
  }
}

}  // namespace kiln::cpu
