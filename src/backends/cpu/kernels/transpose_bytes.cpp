#include "backends/cpu/kernels/transpose_bytes.h"

#include <emmintrin.h>

#include <algorithm>

#include "backends/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kBlock = 16;

// Interleaves each pair (v[i], v[i + 8]) at `Width` bits into v[2i] (low halves) and v[2i + 1]
// (high halves). After the widths 8, 16, 32 and 64, register c holds column c, with the row of
// register i at byte bitReversed(i): so the rows are loaded in bit-reversed order.
template <int Width>
void interleaveStage(__m128i (&v)[kBlock]) {
  __m128i out[kBlock];
  for (int i = 0; i < kBlock / 2; ++i) {
    const __m128i a = v[i], b = v[i + kBlock / 2];
    if constexpr (Width == 8) {
      out[2 * i] = _mm_unpacklo_epi8(a, b), out[2 * i + 1] = _mm_unpackhi_epi8(a, b);
    } else if constexpr (Width == 16) {
      out[2 * i] = _mm_unpacklo_epi16(a, b), out[2 * i + 1] = _mm_unpackhi_epi16(a, b);
    } else if constexpr (Width == 32) {
      out[2 * i] = _mm_unpacklo_epi32(a, b), out[2 * i + 1] = _mm_unpackhi_epi32(a, b);
    } else {
      out[2 * i] = _mm_unpacklo_epi64(a, b), out[2 * i + 1] = _mm_unpackhi_epi64(a, b);
    }
  }
  std::copy(out, out + kBlock, v);
}

// The 16 x 16 block at src (row stride ld) to dst (row stride ldDst), transposed.
void transposeBlock(const uint8_t* src, int64_t ld, uint8_t* dst, int64_t ldDst) {
  constexpr int kBitReversed[kBlock] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
  __m128i v[kBlock];
  for (int i = 0; i < kBlock; ++i)
    v[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + kBitReversed[i] * ld));
  interleaveStage<8>(v);
  interleaveStage<16>(v);
  interleaveStage<32>(v);
  interleaveStage<64>(v);
  for (int i = 0; i < kBlock; ++i)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i * ldDst), v[i]);
}

// Columns [c0, c1) of src: full blocks through registers, the ragged edges element by element.
void transposeColumns(const uint8_t* src, int64_t rows, int64_t cols, int64_t c0, int64_t c1,
                      uint8_t* dst) {
  const int64_t fullRows = rows - rows % kBlock;
  int64_t c = c0;
  for (; c + kBlock <= c1; c += kBlock) {
    for (int64_t r = 0; r < fullRows; r += kBlock)
      transposeBlock(src + r * cols + c, cols, dst + c * rows + r, rows);
    for (int64_t cc = c; cc < c + kBlock; ++cc)
      for (int64_t r = fullRows; r < rows; ++r) dst[cc * rows + r] = src[r * cols + cc];
  }
  for (; c < c1; ++c)
    for (int64_t r = 0; r < rows; ++r) dst[c * rows + r] = src[r * cols + c];
}

}  // namespace

void transposeBytes(const uint8_t* src, int64_t rows, int64_t cols, uint8_t* dst) {
  // Threads take whole column blocks, so only the last one has a ragged edge.
  const int64_t blocks = (cols + kBlock - 1) / kBlock;
  const int64_t minBlocks = std::max<int64_t>(1, kMinElementsPerThread / (kBlock * rows));
  parallelForAtLeast(blocks, minBlocks, [&](int64_t b0, int64_t b1) {
    transposeColumns(src, rows, cols, b0 * kBlock, std::min(cols, b1 * kBlock), dst);
  });
}

}  // namespace kiln::cpu
