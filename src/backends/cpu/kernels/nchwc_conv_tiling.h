// How the NchwcConv kernels (nchwc_conv_avx2.cpp, nchwc_conv_avx512.cpp) walk the output: each
// image's Ho * Wo output pixels, in row-major order, are cut into chunks of at most a register
// block of pixels (a chunk may span output rows, but not in dilated convolutions), and for every
// tap each pixel of a chunk reads the input pixel at its own offset, or a block of zeros where
// the tap falls in the padding.
// Everything here is scalar and in an unnamed namespace, so each ISA's file gets its own copy.
#pragma once
#include <algorithm>
#include <cstdint>

#include "backends/cpu/kernels/nchwc_conv.h"
#include "ir/ops/conv_geometry.h"

namespace kiln::cpu {
namespace {

/// What a pixel whose tap falls in the padding reads instead of the input: 16 channels of zero.
alignas(64) const float kNchwcZeros[16] = {};

/// Pixel chunks of an image with `pixels` outputs: as many as needed for at most `maxPixels`
/// each, sizes as equal as possible (a 7-wide map is cut 4 + 3, not 6 + 1): the first `longer`
/// chunks have one pixel more than the others.
struct PixelChunks {
  int64_t count = 0, size = 0, longer = 0;
  PixelChunks(int64_t pixels, int64_t maxPixels)
      : count((pixels + maxPixels - 1) / maxPixels), size(pixels / count), longer(pixels % count) {}
  int64_t begin(int64_t c) const { return c * size + (c < longer ? c : longer); }
  int64_t length(int64_t c) const { return size + (c < longer ? 1 : 0); }
};

/// The output pixels of a convolution cut into chunks of at most maxPixels. Chunks run across
/// rows (the fewest, fullest chunks), except in dilated convolutions: there a tap skipped for a
/// whole chunk (all its pixels read padding) saves most, and a chunk within one row of a
/// widely dilated kernel skips the taps that pass beyond its side of the map (DeepLabV3's 3x3
/// convs dilated by 12 on 14x14 maps), so each row is cut into chunks of its own.
struct ConvPixelChunks {
  int64_t count = 0;
  ConvPixelChunks(const NchwcConvShape& s, int64_t maxPixels)
      : rows_(s.dilationH > 1 || s.dilationW > 1 ? s.outHeight : 1),
        rowPixels_(s.outHeight * s.outWidth / rows_),
        row_(rowPixels_, maxPixels) {
    count = rows_ * row_.count;
  }
  int64_t begin(int64_t c) const {
    return (c / row_.count) * rowPixels_ + row_.begin(c % row_.count);
  }
  int64_t length(int64_t c) const { return row_.length(c % row_.count); }

  /// The taps a chunk reads the input with, on average (all taps unless dilated): how much of a
  /// slab's weights a chunk reads, which is what sizes a slab of input channels for L1.
  int64_t liveTaps(const NchwcConvShape& s) const {
    if (rows_ == 1) return s.taps();
    // The taps of one axis that some output in [first, last] reads the input with.
    auto live = [](int64_t first, int64_t last, int64_t stride, int64_t pad, int64_t dilation,
                   int64_t taps, int64_t size) {
      int64_t count = 0;
      for (int64_t k = 0; k < taps; ++k)
        count += ir::tapReadsInput(k, first, last, stride, dilation, pad, size) ? 1 : 0;
      return count;
    };
    int64_t rows = 0, columns = 0;  // summed over the rows, and over one row's chunks
    for (int64_t oy = 0; oy < s.outHeight; ++oy)
      rows += live(oy, oy, s.strideH, s.padTop, s.dilationH, s.kernelH, s.height);
    for (int64_t c = 0; c < row_.count; ++c)
      columns += live(row_.begin(c), row_.begin(c) + row_.length(c) - 1, s.strideW, s.padLeft,
                      s.dilationW, s.kernelW, s.width);
    return std::max<int64_t>(1, rows * columns / (s.outHeight * row_.count));
  }

 private:
  int64_t rows_, rowPixels_;
  PixelChunks row_;
};

/// Calls fn(image, group, chunk) for the tasks [t0, t1) of the grid images x groups x chunks
/// (chunk fastest), dividing only once.
template <typename Fn>
inline void forEachChunkTask(int64_t t0, int64_t t1, int64_t groups, int64_t chunks, Fn&& fn) {
  int64_t c = t0 % chunks, g = (t0 / chunks) % groups, image = t0 / (chunks * groups);
  for (int64_t t = t0; t < t1; ++t) {
    fn(image, g, c);
    if (++c == chunks) {
      c = 0;
      if (++g == groups) {
        g = 0;
        ++image;
      }
    }
  }
}

/// Where the output pixels q0 .. q0 + n - 1 start reading the input (before adding a tap's offset).
template <int P>
struct ChunkOrigins {
  int64_t iy[P];
  int64_t ix[P];
  ChunkOrigins(const NchwcConvShape& s, int64_t q0, int n) {
    int64_t oy = q0 / s.outWidth, ox = q0 - oy * s.outWidth;
    for (int p = 0; p < P; ++p) {
      iy[p] = oy * s.strideH - s.padTop;
      ix[p] = ox * s.strideW - s.padLeft;
      if (p + 1 < n && ++ox == s.outWidth) {  // pixels past n repeat the last one
        ox = 0;
        ++oy;
      }
    }
  }
  /// off[p] = the input pixel index (iy * W + ix) of tap (ky, kx) for pixel p, or -1 in the
  /// padding; returns whether any pixel reads the input.
  bool tapOffsets(const NchwcConvShape& s, int64_t ky, int64_t kx, int64_t* off) const {
    bool any = false;
    const int64_t dy = ky * s.dilationH, dx = kx * s.dilationW;
    for (int p = 0; p < P; ++p) {
      const int64_t y = iy[p] + dy, x = ix[p] + dx;
      const bool inside = static_cast<uint64_t>(y) < static_cast<uint64_t>(s.height) &&
                          static_cast<uint64_t>(x) < static_cast<uint64_t>(s.width);
      off[p] = inside ? y * s.width + x : -1;
      any |= inside;
    }
    return any;
  }
};

}  // namespace
}  // namespace kiln::cpu
