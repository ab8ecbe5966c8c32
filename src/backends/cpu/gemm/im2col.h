// Lowering of convolutions to GEMM: im2col gathers every kernel tap of an image into a row of a
// [channels * kernelSize, positions] matrix (Conv); col2im scatters such a matrix back onto an
// image, adding overlaps (ConvTranspose).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ir/ops/conv_geometry.h"
#include "kiln/tensor.h"

namespace kiln::cpu {

/// Walks the kernel taps k and the positions p of `positions` (row-major) where image coordinate
/// p[d] * stride[d] - padBegin[d] + k[d] * dilation[d] is used. For each run along the last
/// dimension it calls fn(k, runStart, imageBase, lo, hi): the run covers flat positions
/// runStart + [0, lastDim); those in [lo, hi) hit the image at imageBase + o * lastStride, the rest
/// fall in the padding.
template <typename Fn>
void forEachPatchRun(const Shape& image, const Shape& positions, const ir::ConvGeometry& g,
                     Fn&& fn) {
  const size_t nd = image.size();
  const int64_t kernelSize = shapeNumel(g.kernel);
  const int64_t runLength = positions[nd - 1];
  const int64_t runs = shapeNumel(positions) / std::max<int64_t>(runLength, 1);
  const int64_t imageLast = image[nd - 1];
  const int64_t lastStride = g.strides[nd - 1];
  std::vector<int64_t> k(nd, 0), p(nd, 0);
  for (int64_t kIndex = 0; kIndex < kernelSize; ++kIndex) {
    for (int64_t rem = kIndex, d = static_cast<int64_t>(nd) - 1; d >= 0; --d) {
      k[d] = rem % g.kernel[d];
      rem /= g.kernel[d];
    }
    // Positions o of the last dim with 0 <= o * stride + shift < imageLast.
    const int64_t shift = k[nd - 1] * g.dilations[nd - 1] - g.padsBegin[nd - 1];
    const int64_t lo = std::min(runLength, shift >= 0 ? 0 : (-shift + lastStride - 1) / lastStride);
    const int64_t hi = std::clamp<int64_t>(
        imageLast - 1 - shift < 0 ? 0 : (imageLast - 1 - shift) / lastStride + 1, lo, runLength);
    std::fill(p.begin(), p.end(), 0);
    for (int64_t run = 0; run < runs; ++run) {
      int64_t offset = 0;
      bool inside = true;
      for (size_t d = 0; d + 1 < nd; ++d) {
        const int64_t coord = p[d] * g.strides[d] - g.padsBegin[d] + k[d] * g.dilations[d];
        inside = inside && coord >= 0 && coord < image[d];
        offset = offset * image[d] + coord;
      }
      if (inside) {
        fn(kIndex, run * runLength, offset * imageLast + shift, lo, hi);
      } else {
        fn(kIndex, run * runLength, int64_t{0}, int64_t{0}, int64_t{0});
      }
      for (size_t d = nd - 1; d-- > 0;) {  // next run: advance all but the last dim
        if (++p[d] < positions[d]) break;
        p[d] = 0;
      }
    }
  }
}

/// col[(c * kernelSize + k) * positionCount + p] = image tap (padValue in the padding: zero, or
/// the zero point of a quantized image).
template <typename T>
void im2col(const T* image, int64_t channels, const Shape& imageShape, const Shape& positions,
            const ir::ConvGeometry& g, T* col, T padValue = T(0)) {
  const int64_t imageSize = shapeNumel(imageShape);
  const int64_t kernelSize = shapeNumel(g.kernel);
  const int64_t positionCount = shapeNumel(positions);
  const int64_t runLength = positions.back();
  const int64_t stride = g.strides.back();
  for (int64_t c = 0; c < channels; ++c) {
    const T* src = image + c * imageSize;
    T* rows = col + c * kernelSize * positionCount;
    forEachPatchRun(imageShape, positions, g,
                    [&](int64_t k, int64_t start, int64_t base, int64_t lo, int64_t hi) {
                      T* dst = rows + k * positionCount + start;
                      std::fill(dst, dst + lo, padValue);
                      if (stride == 1) {
                        std::copy(src + (base + lo), src + (base + hi), dst + lo);
                      } else {
                        for (int64_t o = lo; o < hi; ++o) dst[o] = src[base + o * stride];
                      }
                      std::fill(dst + hi, dst + runLength, padValue);
                    });
  }
}

/// image[tap] += col[(c * kernelSize + k) * positionCount + p] for every tap inside the image.
template <typename T>
void col2imAdd(const T* col, int64_t channels, const Shape& imageShape, const Shape& positions,
               const ir::ConvGeometry& g, T* image) {
  const int64_t imageSize = shapeNumel(imageShape);
  const int64_t kernelSize = shapeNumel(g.kernel);
  const int64_t positionCount = shapeNumel(positions);
  const int64_t stride = g.strides.back();
  for (int64_t c = 0; c < channels; ++c) {
    T* dst = image + c * imageSize;
    const T* rows = col + c * kernelSize * positionCount;
    forEachPatchRun(imageShape, positions, g,
                    [&](int64_t k, int64_t start, int64_t base, int64_t lo, int64_t hi) {
                      const T* src = rows + k * positionCount + start;
                      for (int64_t o = lo; o < hi; ++o) dst[base + o * stride] += src[o];
                    });
  }
}

}  // namespace kiln::cpu
