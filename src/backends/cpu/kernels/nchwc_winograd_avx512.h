// The Winograd F(m x m, 3 x 3) kernel on blocked tensors (nchwc_winograd.h), shared by its FP32
// (nchwc_winograd_avx512.cpp) and BF16 (nchwc_winograd_bf16_avx512bf16.cpp) builds, which differ
// only in how the transformed input V is stored and multiplied (the `Products` policy: floats and
// FMAs, or BF16 channel pairs and vdpbf16ps). Per image and pass over rows of tiles (one pass
// unless the transformed input passes kPassBytes):
//  1. input transform: every (m + 2)^2 input tile of every channel block becomes V laid out
//     [position][ci block][tile][words of a block] (parallel over channel blocks x tile rows);
//  2. for bands of tiles x groups of output blocks (parallel): for each position, the sum over
//     input channels is a 1x1 convolution of V's tiles with that position's packed weights, in
//     register blocks of M output blocks x P tiles (M * P accumulators, M weight vectors and a
//     broadcast fit the 32 registers), into the band's FP32 products [position][M][tile][16];
//  3. then, in the same task, the output transform of the band's tiles, bias, residual and
//     Relu / Clip in registers, and the store of each tile's valid pixels to Y (other activations
//     run over each stored tile row).
// Bands are cut so that a band's V and products stay in L2. The sum only runs over the real
// input channels, so X's padding channels (unspecified, maybe NaN) are never read into it.
// Include only from *_avx512*.cpp files: everything is in an unnamed namespace.
#pragma once
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/activation_simd.h"
#include "backends/cpu/kernels/nchwc_conv_avx512.h"
#include "backends/cpu/kernels/nchwc_winograd.h"
#include "backends/cpu/thread_pool.h"
#include "core/aligned_memory.h"

namespace kiln::cpu::detail {
namespace {

// The 1-D transforms of F(m, 3) on vectors: input B^T d (alpha -> alpha) and output A^T p
// (alpha -> m), alpha = m + 2, for the points of nchwc_winograd.cpp's G.
template <int Mt>
struct WinogradTile;

template <>
struct WinogradTile<2> {
  static constexpr int kAlpha = 4;
  static inline void input(const __m512 (&d)[4], __m512 (&t)[4]) {
    t[0] = _mm512_sub_ps(d[0], d[2]);
    t[1] = _mm512_add_ps(d[1], d[2]);
    t[2] = _mm512_sub_ps(d[2], d[1]);
    t[3] = _mm512_sub_ps(d[1], d[3]);
  }
  static inline void output(const __m512 (&p)[4], __m512 (&o)[2]) {
    o[0] = _mm512_add_ps(p[0], _mm512_add_ps(p[1], p[2]));
    o[1] = _mm512_sub_ps(_mm512_sub_ps(p[1], p[2]), p[3]);
  }
};

template <>
struct WinogradTile<4> {
  static constexpr int kAlpha = 6;
  static inline void input(const __m512 (&d)[6], __m512 (&t)[6]) {
    const __m512 four = _mm512_set1_ps(4.0f), five = _mm512_set1_ps(5.0f),
                 two = _mm512_set1_ps(2.0f);
    t[0] = _mm512_fnmadd_ps(five, d[2], _mm512_fmadd_ps(four, d[0], d[4]));
    t[1] = _mm512_fnmadd_ps(four, _mm512_add_ps(d[1], d[2]), _mm512_add_ps(d[3], d[4]));
    t[2] = _mm512_fmadd_ps(four, _mm512_sub_ps(d[1], d[2]), _mm512_sub_ps(d[4], d[3]));
    const __m512 e = _mm512_sub_ps(d[4], d[2]), f = _mm512_sub_ps(d[3], d[1]);
    t[3] = _mm512_fmadd_ps(two, f, e);
    t[4] = _mm512_fnmadd_ps(two, f, e);
    t[5] = _mm512_fnmadd_ps(five, d[3], _mm512_fmadd_ps(four, d[1], d[5]));
  }
  static inline void output(const __m512 (&p)[6], __m512 (&o)[4]) {
    const __m512 a = _mm512_add_ps(p[1], p[2]), b = _mm512_sub_ps(p[1], p[2]);
    const __m512 c = _mm512_add_ps(p[3], p[4]), d = _mm512_sub_ps(p[3], p[4]);
    o[0] = _mm512_add_ps(_mm512_add_ps(p[0], a), c);
    o[1] = _mm512_fmadd_ps(_mm512_set1_ps(2.0f), d, b);
    o[2] = _mm512_fmadd_ps(_mm512_set1_ps(4.0f), c, a);
    o[3] = _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(8.0f), d, b), p[5]);
  }
};

// V for the tile whose input starts at (iy0, ix0) of one channel block's plane [H][W][16]:
// position (i, j) goes to v + (i * alpha + j) * positionStride, stored by Products::store with
// the block's real-channel lanes. Pixels outside the plane are zero.
template <int Mt, class Products>
inline void transformInputTile(const float* plane, int64_t height, int64_t width, int64_t iy0,
                               int64_t ix0, typename Products::Word* v, int64_t positionStride,
                               __mmask16 lanes) {
  using T = WinogradTile<Mt>;
  constexpr int A = T::kAlpha;
  __m512 rows[A][A];  // d B, row by row
  const bool interior = iy0 >= 0 && ix0 >= 0 && iy0 + A <= height && ix0 + A <= width;
#pragma GCC unroll 6
  for (int i = 0; i < A; ++i) {
    __m512 d[A];
    const int64_t y = iy0 + i;
    if (interior) {
      const float* row = plane + (y * width + ix0) * kBlock;
#pragma GCC unroll 6
      for (int j = 0; j < A; ++j) d[j] = _mm512_loadu_ps(row + j * kBlock);
    } else {
      const bool rowInside = y >= 0 && y < height;
#pragma GCC unroll 6
      for (int j = 0; j < A; ++j) {
        const int64_t x = ix0 + j;
        d[j] = rowInside && x >= 0 && x < width ? _mm512_loadu_ps(plane + (y * width + x) * kBlock)
                                                : _mm512_setzero_ps();
      }
    }
    T::input(d, rows[i]);
  }
#pragma GCC unroll 6
  for (int j = 0; j < A; ++j) {
    __m512 c[A], t[A];
#pragma GCC unroll 6
    for (int i = 0; i < A; ++i) c[i] = rows[i][j];
    T::input(c, t);
#pragma GCC unroll 6
    for (int i = 0; i < A; ++i) Products::store(v + (i * A + j) * positionStride, t[i], lanes);
  }
}

// out[m][p] = sum over the packed channels c < channels of w[c][m] . v_p[c], for the P
// consecutive tiles at v (channel block stride blockStride), weights [c][M][16]; out's blocks are
// outStride apart.
template <class Products, int M, int P>
inline void multiplyTiles(const typename Products::Word* v, int64_t blockStride,
                          const typename Products::Word* w, int64_t channels, float* out,
                          int64_t outStride) {
  constexpr int64_t kWords = Products::kWordsPerBlock;
  __m512 acc[M][P];
#pragma GCC unroll 4
  for (int m = 0; m < M; ++m) {
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p) acc[m][p] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < channels; c += kWords) {
    Products::template accumulate<M, P>(acc, v + (c / kWords) * blockStride, w + c * M * kBlock,
                                        std::min(kWords, channels - c));
  }
#pragma GCC unroll 4
  for (int m = 0; m < M; ++m) {
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p) _mm512_storeu_ps(out + m * outStride + p * kBlock, acc[m][p]);
  }
}

// multiplyTiles<M, n> for the run-time n <= P.
template <class Products, int M, int P>
void multiplyTilesOfSize(int64_t n, const typename Products::Word* v, int64_t blockStride,
                         const typename Products::Word* w, int64_t channels, float* out,
                         int64_t outStride) {
  if constexpr (P > 1) {
    if (n < P)
      return multiplyTilesOfSize<Products, M, P - 1>(n, v, blockStride, w, channels, out,
                                                     outStride);
  }
  multiplyTiles<Products, M, P>(v, blockStride, w, channels, out, outStride);
}

// Where one output tile of one output block goes.
struct OutputTile {
  float* y;          // the block's output plane [Ho][Wo][16]
  const float* z;    // the residual's plane, or null
  int64_t oy0, ox0;  // the tile's first output pixel
  int64_t outHeight, outWidth;
};

// The output transform of one tile of one output block (products p + pos * positionStride),
// plus bias, residual and the register part of the activation; stores the valid pixels.
template <int Mt>
inline void transformOutputTile(const float* p, int64_t positionStride, __m512 bias,
                                const RegisterEpilogue& epi, __mmask16 lanes, const OutputTile& t,
                                const Activation& act) {
  using T = WinogradTile<Mt>;
  constexpr int A = T::kAlpha;
  __m512 cols[Mt][A];  // A^T P, column by column
#pragma GCC unroll 6
  for (int j = 0; j < A; ++j) {
    __m512 c[A], o[Mt];
#pragma GCC unroll 6
    for (int i = 0; i < A; ++i) c[i] = _mm512_loadu_ps(p + (i * A + j) * positionStride);
    T::output(c, o);
#pragma GCC unroll 4
    for (int r = 0; r < Mt; ++r) cols[r][j] = o[r];
  }
  const int64_t rows = std::min<int64_t>(Mt, t.outHeight - t.oy0),
                n = std::min<int64_t>(Mt, t.outWidth - t.ox0);
  for (int64_t r = 0; r < rows; ++r) {
    __m512 o[Mt];
    T::output(cols[r], o);
    const int64_t offset = ((t.oy0 + r) * t.outWidth + t.ox0) * kBlock;
    float* y = t.y + offset;
    if (n == Mt) {
#pragma GCC unroll 4
      for (int c = 0; c < Mt; ++c) {
        _mm512_storeu_ps(
            y + c * kBlock,
            epi.apply(_mm512_add_ps(o[c], bias), t.z ? t.z + offset + c * kBlock : nullptr, lanes));
      }
    } else {
      for (int64_t c = 0; c < n; ++c) {
        _mm512_storeu_ps(
            y + c * kBlock,
            epi.apply(_mm512_add_ps(o[c], bias), t.z ? t.z + offset + c * kBlock : nullptr, lanes));
      }
    }
    if (epi.rest) applyEpilogueAvx512(act, y, n * kBlock, nullptr, false, nullptr);
  }
}

// Bytes a band's transformed input and products (4 output blocks) may take: about the 2 MiB L2
// (ResNet-50's 128-channel 28x28 layers: 0.84-0.89 ms in one band against 1.02 in two of 1 MiB).
constexpr int64_t kBandBytes = 2 << 20;
// Bytes of transformed input of one pass over rows of tiles: bounds the scratch memory on large
// images (ResNet-50's layers take one pass).
constexpr int64_t kPassBytes = 8 << 20;

// The 4-byte words of V one tile of one channel block takes: 16 floats, or 8 pairs of BF16.
inline int64_t vWordsPerBlock(const NchwcWinogradWeights& w) {
  return w.bf16 ? kBlock / 2 : kBlock;
}

// How one pass over `tiles` tiles is cut: bands of tiles x groups of output blocks, at least two
// tasks per thread, and the tasks in `parts` runs of consecutive tasks, one per thread at most,
// each with its own slice of the products.
struct Bands {
  int64_t bandTiles = 0, tasks = 0, parts = 0;
};
inline Bands bandsOf(const NchwcConvShape& s, int positions, int64_t vWords, int64_t tiles,
                     int64_t threads) {
  const int64_t groups = nchwcOutBlockGroups(s.outBlocks());
  const int64_t tileBytes =
      positions * (s.inBlocks() * vWords + kNchwcOutBlocks * kBlock) * int64_t(sizeof(float));
  int64_t bands = std::max<int64_t>(1, (tiles * tileBytes + kBandBytes - 1) / kBandBytes);
  if (bands * groups < 2 * threads) bands = std::min(tiles, (2 * threads + groups - 1) / groups);
  Bands b;
  b.bandTiles = (tiles + bands - 1) / bands;
  bands = (tiles + b.bandTiles - 1) / b.bandTiles;
  b.tasks = bands * groups;
  b.parts = std::min(b.tasks, threads);
  return b;
}

// Tile rows per pass over one image.
inline int64_t rowsPerPassOf(const NchwcConvShape& s, int m, int64_t vWords) {
  const int64_t positions = (m + 2) * (m + 2), tilesW = (s.outWidth + m - 1) / m;
  const int64_t rowBytes = positions * s.inBlocks() * vWords * tilesW * int64_t(sizeof(float));
  return std::max<int64_t>(1, kPassBytes / rowBytes);
}

// 4-byte words of one pass's transformed input and floats of one part's products for passes of
// `rows` tile rows.
struct PassScratch {
  int64_t inputWords = 0, productFloats = 0, parts = 0;
};
inline PassScratch passScratch(const NchwcConvShape& s, int m, int64_t vWords, int64_t rows,
                               int64_t threads) {
  const int64_t positions = (m + 2) * (m + 2), tiles = rows * ((s.outWidth + m - 1) / m);
  const Bands b = bandsOf(s, static_cast<int>(positions), vWords, tiles, threads);
  return {positions * s.inBlocks() * tiles * vWords,
          positions * kNchwcOutBlocks * b.bandTiles * kBlock, b.parts};
}

// The scratch of passes of `rows` tile rows (the full passes) and of the last, shorter one.
inline PassScratch largestPassScratch(const NchwcConvShape& s, const NchwcWinogradWeights& w,
                                      int64_t threads) {
  const int m = w.tile;
  const int64_t vWords = vWordsPerBlock(w), tilesH = (s.outHeight + m - 1) / m,
                rowsPerPass = std::min(tilesH, rowsPerPassOf(s, m, vWords));
  PassScratch full = passScratch(s, m, vWords, rowsPerPass, threads);
  if (tilesH % rowsPerPass != 0) {
    const PassScratch last = passScratch(s, m, vWords, tilesH % rowsPerPass, threads);
    full.productFloats = std::max(full.productFloats, last.productFloats);
    full.parts = std::max(full.parts, last.parts);
  }
  return full;
}

// The output tile rows [ty0, ty1) of one image; `scratch` holds the transformed input
// (inputWords words), then `productFloats` floats of products for each part.
template <int Mt, class Products>
void winogradRows(const NchwcConvArgs& a, const NchwcWinogradWeights& weights, int64_t image,
                  int64_t ty0, int64_t ty1, float* scratch, int64_t inputWords,
                  int64_t productFloats) {
  using Word = typename Products::Word;
  constexpr int64_t kWords = Products::kWordsPerBlock;
  const NchwcConvShape& s = *a.shape;
  constexpr int A = Mt + 2, positions = A * A;
  const int64_t rows = ty1 - ty0, tilesW = (s.outWidth + Mt - 1) / Mt, tiles = rows * tilesW;
  const int64_t inBlocks = s.inBlocks(), outBlocks = s.outBlocks(),
                groups = nchwcOutBlockGroups(outBlocks);
  const int64_t inPlane = s.height * s.width, outPlane = s.outHeight * s.outWidth;
  const int64_t positionStride = inBlocks * tiles * kWords;
  Word* v = reinterpret_cast<Word*>(scratch);

  // 1. Input transform, one tile row of one channel block per item.
  const float* x = a.x + image * inBlocks * inPlane * kBlock;
  parallelForAtLeast(inBlocks * rows, 2, [&](int64_t i0, int64_t i1) {
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t cb = item / rows, row = item % rows;
      const float* plane = x + cb * inPlane * kBlock;
      const __mmask16 lanes = laneMask(cb, s.inChannels);
      for (int64_t tx = 0; tx < tilesW; ++tx) {
        transformInputTile<Mt, Products>(
            plane, s.height, s.width, (ty0 + row) * Mt - s.padTop, tx * Mt - s.padLeft,
            v + (cb * tiles + row * tilesW + tx) * kWords, positionStride, lanes);
      }
    }
  });

  // 2 + 3. Bands of tiles x groups of output blocks, in parts that each own a slice of products.
  const ThreadPool* pool = currentThreadPool();
  const Bands b = bandsOf(s, positions, kWords, tiles, pool ? pool->size() : 1);
  const int64_t bandTiles = b.bandTiles;
  const RegisterEpilogue epi(a.act);
  const int64_t packedChannels = Products::packedChannels(s.inChannels);
  const int64_t weightPositionWords = outBlocks * kBlock * packedChannels;
  const Word* packed = reinterpret_cast<const Word*>(weights.data.get());
  parallelFor(b.parts, [&](int64_t p0, int64_t p1) {
    for (int64_t part = p0; part < p1; ++part) {
      float* products = scratch + inputWords + part * productFloats;
      for (int64_t task = part * b.tasks / b.parts; task < (part + 1) * b.tasks / b.parts; ++task) {
        const int64_t band = task / groups, g = task % groups;
        const NchwcBlockRange r = nchwcOutBlockGroup(outBlocks, g);
        const int M = static_cast<int>(r.end - r.begin);
        const int64_t first = band * bandTiles, count = std::min(tiles, first + bandTiles) - first;
        const int64_t productStride = M * count * kBlock;  // per position; blocks count * 16 apart
        // Register blocks of nearly equal size (49 tiles at 6: 4 x 6 + 5 x 5, not 8 x 6 + 1).
        const int64_t chunks = (count + maxRegisterPixels(M) - 1) / maxRegisterPixels(M),
                      chunkSize = count / chunks;
        for (int pos = 0; pos < positions; ++pos) {
          const Word* w = packed + pos * weightPositionWords + r.begin * kBlock * packedChannels;
          const Word* vp = v + pos * positionStride + first * kWords;
          float* out = products + pos * productStride;
          for (int64_t chunk = 0, q = 0; chunk < chunks; ++chunk) {
            const int64_t n = chunkSize + (chunk < count % chunks ? 1 : 0);
            const Word* vq = vp + q * kWords;
            float* oq = out + q * kBlock;
            const int64_t vStride = tiles * kWords, oStride = count * kBlock;
            switch (M) {
              case 4:
                multiplyTilesOfSize<Products, 4, maxRegisterPixels(4)>(n, vq, vStride, w,
                                                                       packedChannels, oq, oStride);
                break;
              case 3:
                multiplyTilesOfSize<Products, 3, maxRegisterPixels(3)>(n, vq, vStride, w,
                                                                       packedChannels, oq, oStride);
                break;
              case 2:
                multiplyTilesOfSize<Products, 2, maxRegisterPixels(2)>(n, vq, vStride, w,
                                                                       packedChannels, oq, oStride);
                break;
              default:
                multiplyTilesOfSize<Products, 1, maxRegisterPixels(1)>(n, vq, vStride, w,
                                                                       packedChannels, oq, oStride);
                break;
            }
            q += n;
          }
        }
        for (int m = 0; m < M; ++m) {
          const int64_t ob = r.begin + m;
          const __m512 bias = _mm512_loadu_ps(a.bias + ob * kBlock);
          const __mmask16 lanes = laneMask(ob, s.outChannels);
          const int64_t planeOffset = (image * outBlocks + ob) * outPlane * kBlock;
          OutputTile t{
              a.y + planeOffset, a.residual ? a.residual + planeOffset : nullptr, 0, 0, s.outHeight,
              s.outWidth};
          for (int64_t i = 0; i < count; ++i) {
            const int64_t tile = first + i;
            t.oy0 = (ty0 + tile / tilesW) * Mt;
            t.ox0 = tile % tilesW * Mt;
            transformOutputTile<Mt>(products + (m * count + i) * kBlock, productStride, bias, epi,
                                    lanes, t, a.act);
          }
        }
      }
    }
  });
}

// The whole convolution, pass by pass, in a.scratch (or a buffer of its own).
template <class Products>
void winogradConvolve(const NchwcConvArgs& a, const NchwcWinogradWeights& weights) {
  const NchwcConvShape& s = *a.shape;
  const int m = weights.tile;
  const int64_t tilesH = (s.outHeight + m - 1) / m;
  const int64_t rowsPerPass = rowsPerPassOf(s, m, Products::kWordsPerBlock);
  const ThreadPool* pool = currentThreadPool();
  const PassScratch p = largestPassScratch(s, weights, pool ? pool->size() : 1);
  ScratchFloats own;  // when the caller has no workspace
  float* scratch = a.scratch ? a.scratch : own.get(p.inputWords + p.parts * p.productFloats);
  for (int64_t image = 0; image < s.batch; ++image) {
    for (int64_t ty0 = 0; ty0 < tilesH; ty0 += rowsPerPass) {
      const int64_t ty1 = std::min(tilesH, ty0 + rowsPerPass);
      if (m == 4)
        winogradRows<4, Products>(a, weights, image, ty0, ty1, scratch, p.inputWords,
                                  p.productFloats);
      else
        winogradRows<2, Products>(a, weights, image, ty0, ty1, scratch, p.inputWords,
                                  p.productFloats);
    }
  }
}

}  // namespace
}  // namespace kiln::cpu::detail
