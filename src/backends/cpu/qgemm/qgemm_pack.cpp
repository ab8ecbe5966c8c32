// Strip packing of 8-bit operands (qgemm_kernels.h's layout). The activations are packed on every
// call, so the two layouts they come in have their own loops: columns of a K x N matrix whose
// rows are contiguous (Conv's X or im2col rows: four rows interleaved with byte unpacks), and rows
// of an M x K matrix with contiguous k (MatMul's A: 4-byte groups copied). Anything else
// (weights, packed once) takes the element by element loop.
#include "backends/cpu/qgemm/qgemm_pack.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace kiln::cpu {
namespace {

inline uint8_t byteAt(const QMatrixView& v, int64_t outer, int64_t k) {
  return static_cast<const uint8_t*>(v.data)[outer * v.outerStride + k * v.depthStride];
}

void packElementwise(const QMatrixView& v, int64_t first, int64_t count, int64_t K, int64_t width,
                     uint8_t xorMask, uint8_t* dst) {
  const int64_t groups = (K + 3) / 4;
  for (int64_t s = 0; s * width < count; ++s) {
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t lane = 0; lane < width; ++lane) {
        const int64_t outer = s * width + lane;
        for (int64_t b = 0; b < 4; ++b) {
          const int64_t k = 4 * g + b;
          *dst++ = outer < count && k < K
                       ? static_cast<uint8_t>(byteAt(v, first + outer, k) ^ xorMask)
                       : 0;
        }
      }
    }
  }
}

// Columns of a matrix with contiguous rows (outerStride 1): 16 columns of 4 rows at a time are
// interleaved into 16 lanes of 4 bytes.
void packColumns(const QMatrixView& v, int64_t first, int64_t count, int64_t K, int64_t width,
                 uint8_t xorMask, uint8_t* dst) {
  const uint8_t* src = static_cast<const uint8_t*>(v.data) + first;
  const int64_t ld = v.depthStride;
  const int64_t groups = (K + 3) / 4;
  const __m128i mask = _mm_set1_epi8(static_cast<char>(xorMask));
  for (int64_t s = 0; s * width < count; ++s) {
    const int64_t c0 = s * width;
    const int64_t cols = std::min(width, count - c0);
    for (int64_t g = 0; g < groups; ++g) {
      uint8_t* out = dst + (s * groups + g) * width * 4;
      const int64_t k0 = 4 * g;
      if (k0 + 4 <= K) {
        const uint8_t* r[4] = {src + k0 * ld + c0, src + (k0 + 1) * ld + c0,
                               src + (k0 + 2) * ld + c0, src + (k0 + 3) * ld + c0};
        int64_t j = 0;
        for (; j + 16 <= cols; j += 16) {
          const __m128i a =
              _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[0] + j)), mask);
          const __m128i b =
              _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[1] + j)), mask);
          const __m128i c =
              _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[2] + j)), mask);
          const __m128i d =
              _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r[3] + j)), mask);
          const __m128i abLo = _mm_unpacklo_epi8(a, b), abHi = _mm_unpackhi_epi8(a, b);
          const __m128i cdLo = _mm_unpacklo_epi8(c, d), cdHi = _mm_unpackhi_epi8(c, d);
          __m128i* o = reinterpret_cast<__m128i*>(out + j * 4);
          _mm_storeu_si128(o, _mm_unpacklo_epi16(abLo, cdLo));
          _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(abLo, cdLo));
          _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(abHi, cdHi));
          _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(abHi, cdHi));
        }
        for (; j < cols; ++j) {
          for (int b = 0; b < 4; ++b) out[j * 4 + b] = static_cast<uint8_t>(r[b][j] ^ xorMask);
        }
      } else {
        for (int64_t j = 0; j < cols; ++j) {
          for (int64_t b = 0; b < 4; ++b) {
            out[j * 4 + b] =
                k0 + b < K ? static_cast<uint8_t>(src[(k0 + b) * ld + c0 + j] ^ xorMask) : 0;
          }
        }
      }
      std::memset(out + cols * 4, 0, static_cast<size_t>((width - cols) * 4));
    }
  }
}

// Rows of a matrix with contiguous k (depthStride 1): each row's groups of 4 bytes are copied
// to their lanes.
void packRows(const QMatrixView& v, int64_t first, int64_t count, int64_t K, int64_t width,
              uint8_t xorMask, uint8_t* dst) {
  const uint8_t* src = static_cast<const uint8_t*>(v.data) + first * v.outerStride;
  const int64_t groups = (K + 3) / 4, full = K / 4;
  const uint32_t mask = 0x01010101u * xorMask;
  for (int64_t s = 0; s * width < count; ++s) {
    uint8_t* strip = dst + s * groups * width * 4;
    for (int64_t lane = 0; lane < width; ++lane) {
      const int64_t row = s * width + lane;
      uint8_t* out = strip + lane * 4;
      if (row >= count) {
        for (int64_t g = 0; g < groups; ++g) std::memset(out + g * width * 4, 0, 4);
        continue;
      }
      const uint8_t* r = src + row * v.outerStride;
      for (int64_t g = 0; g < full; ++g) {
        uint32_t word;
        std::memcpy(&word, r + 4 * g, 4);
        word ^= mask;
        std::memcpy(out + g * width * 4, &word, 4);
      }
      if (full < groups) {
        uint8_t tail[4] = {0, 0, 0, 0};
        for (int64_t k = 4 * full; k < K; ++k)
          tail[k - 4 * full] = static_cast<uint8_t>(r[k] ^ xorMask);
        std::memcpy(out + full * width * 4, tail, 4);
      }
    }
  }
}

}  // namespace

void packQStrips(const QMatrixView& v, int64_t first, int64_t count, int64_t K, int64_t width,
                 uint8_t xorMask, uint8_t* dst) {
  if (v.depthStride == 1) return packRows(v, first, count, K, width, xorMask, dst);
  if (v.outerStride == 1) return packColumns(v, first, count, K, width, xorMask, dst);
  packElementwise(v, first, count, K, width, xorMask, dst);
}

void sumQOuter(const QMatrixView& v, int64_t first, int64_t count, int64_t K, uint8_t xorMask,
               bool storedUnsigned, int32_t* sums) {
  auto stored = [&](int64_t outer, int64_t k) -> int32_t {
    const uint8_t b = static_cast<uint8_t>(byteAt(v, first + outer, k) ^ xorMask);
    return storedUnsigned ? static_cast<int32_t>(b) : static_cast<int32_t>(static_cast<int8_t>(b));
  };
  if (v.outerStride == 1) {  // contiguous outer: accumulate row by row (vectorizes)
    std::fill(sums, sums + count, 0);
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t i = 0; i < count; ++i) sums[i] += stored(i, k);
    }
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    int32_t s = 0;
    for (int64_t k = 0; k < K; ++k) s += stored(i, k);
    sums[i] = s;
  }
}

}  // namespace kiln::cpu
