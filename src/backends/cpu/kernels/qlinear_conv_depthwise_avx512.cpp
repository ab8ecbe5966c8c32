// The channel-vectorized depthwise candidate of QLinearConv, ConvInteger and kiln::QConv (2-D, one
// input and one output channel per group), with AVX-512: sixteen channels at a time. Each block of
// sixteen input channels is copied once into a zero-padded, channels-innermost plane of floats
// x - x_zp (padding taps then add 0, as they must: (x_zp - x_zp) * w), every output position sums
// its taps with one 16-lane FMA each, and the int32 sums, transposed back to one row per channel,
// are finished by the GEMM's epilogue. Against the plane-by-plane candidate
// (qlinear_conv_depthwise.cpp) this has no per-plane overhead (small late-network planes) and no
// strided loads (stride 2).
//
// Channels-last X and Y (kiln::QConv's channels_last = 1) skip both moves: a position's sixteen
// channels are one load, and the sums, one row per position, are finished in place.
//
// Float sums are exact, as in the plane-by-plane candidate: at most kMaxDepthwiseTaps terms of
// magnitude <= 255 * 255, so every partial sum is an integer below 2^24.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "backends/cpu/kernels/qconv_common.h"
#include "backends/cpu/kernels/qgemm_op_support.h"
#include "backends/cpu/qgemm/qgemm_epilogue.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kLanes = 16;

struct QConvDepthwiseChannels {
  QConv c;
  std::vector<int16_t> w;  // outChannels x kernelSize, as W stores them
};

// The padded input region the outputs read: rows x cols positions of kLanes floats.
struct PaddedPlane {
  int64_t rows = 0, cols = 0;
  int64_t floats() const { return rows * cols * kLanes; }
};

PaddedPlane paddedPlaneOf(const ir::ConvGeometry& g) {
  if (g.output[0] <= 0 || g.output[1] <= 0) return {};
  return {(g.output[0] - 1) * g.strides[0] + (g.kernel[0] - 1) * g.dilations[0] + 1,
          (g.output[1] - 1) * g.strides[1] + (g.kernel[1] - 1) * g.dilations[1] + 1};
}

uint64_t bytesOf(int64_t floats) { return alignTo64(static_cast<uint64_t>(floats) * 4); }

// Per thread: the padded block, its int32 sums (one row per channel) and the block's weights.
uint64_t threadBytes(const PaddedPlane& p, int64_t outSize, int64_t taps) {
  return bytesOf(p.floats()) + bytesOf(kLanes * outSize) + bytesOf(kLanes * taps);
}

uint64_t workspaceBytes(const QConv& c, const PaddedPlane& p, int64_t outSize, int threads) {
  return static_cast<uint64_t>(std::max(threads, 1)) * threadBytes(p, outSize, c.kernelSize) +
         qconvParamBytes(c);
}

// block[(py * cols + px) * kLanes + lane] = x[channel0 + lane][py - padTop][px - padLeft] - x_zp,
// 0 outside the image and for lanes past the last channel. Each position's sixteen channels are one
// gather of 32-bit words at the channels' bytes (the byte kept, sign-extended for int8), except the
// last three positions of the image's last row, whose words would reach past the last plane.
template <typename T>
void fillBlock(const T* image, int64_t ih, int64_t iw, int64_t lanes, int32_t xZero,
               const ir::ConvGeometry& g, const PaddedPlane& p, float* block) {
  const int64_t padTop = g.padsBegin[0], padLeft = g.padsBegin[1];
  const int64_t xLo = std::max<int64_t>(0, -padLeft), xHi = std::min(iw, p.cols - padLeft);
  const int64_t planeSize = ih * iw;
  const __mmask16 active = static_cast<__mmask16>((1u << lanes) - 1);
  const __m512i planeStarts =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(static_cast<int32_t>(planeSize)));
  const __m512 zero = _mm512_set1_ps(static_cast<float>(xZero));
  for (int64_t py = 0; py < p.rows; ++py) {
    float* row = block + py * p.cols * kLanes;
    const int64_t iy = py - padTop;
    if (iy < 0 || iy >= ih || xLo >= xHi) {
      std::memset(row, 0, static_cast<size_t>(p.cols * kLanes) * sizeof(float));
      continue;
    }
    const int64_t first = xLo + padLeft,
                  last = xHi + padLeft;  // the image's columns in the padded row
    std::memset(row, 0, static_cast<size_t>(first * kLanes) * sizeof(float));
    std::memset(row + last * kLanes, 0,
                static_cast<size_t>((p.cols - last) * kLanes) * sizeof(float));
    const int64_t gatherEnd = iy == ih - 1 ? std::max(xLo, xHi - 3) : xHi;
    const T* src = image + iy * iw;
    for (int64_t ix = xLo; ix < gatherEnd; ++ix) {
      __m512i words =
          _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), active, planeStarts, src + ix, 1);
      words = std::is_same_v<T, int8_t> ? _mm512_srai_epi32(_mm512_slli_epi32(words, 24), 24)
                                        : _mm512_and_si512(words, _mm512_set1_epi32(0xFF));
      __m512 v = _mm512_maskz_sub_ps(active, _mm512_cvtepi32_ps(words), zero);
      _mm512_storeu_ps(row + (ix + padLeft) * kLanes, v);
    }
    for (int64_t ix = gatherEnd; ix < xHi; ++ix) {
      float* dst = row + (ix + padLeft) * kLanes;
      for (int64_t lane = 0; lane < kLanes; ++lane) {
        dst[lane] =
            lane < lanes
                ? static_cast<float>(static_cast<int32_t>(src[lane * planeSize + ix]) - xZero)
                : 0.0f;
      }
    }
  }
}

// fillBlock for a channels-last image [ih, iw, channels], channel0 at `image`: sixteen bytes a
// position.
template <typename T>
void fillBlockChannelsLast(const T* image, int64_t ih, int64_t iw, int64_t channels, int64_t lanes,
                           int32_t xZero, const ir::ConvGeometry& g, const PaddedPlane& p,
                           float* block) {
  const int64_t padTop = g.padsBegin[0], padLeft = g.padsBegin[1];
  const __mmask16 active = static_cast<__mmask16>((1u << lanes) - 1);
  const __m512 zero = _mm512_set1_ps(static_cast<float>(xZero));
  for (int64_t py = 0; py < p.rows; ++py) {
    float* row = block + py * p.cols * kLanes;
    const int64_t iy = py - padTop;
    for (int64_t px = 0; px < p.cols; ++px) {
      const int64_t ix = px - padLeft;
      if (iy < 0 || iy >= ih || ix < 0 || ix >= iw) {
        _mm512_storeu_ps(row + px * kLanes, _mm512_setzero_ps());
        continue;
      }
      const __m128i bytes = _mm_maskz_loadu_epi8(active, image + (iy * iw + ix) * channels);
      const __m512i words =
          std::is_same_v<T, int8_t> ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
      _mm512_storeu_ps(row + px * kLanes,
                       _mm512_maskz_sub_ps(active, _mm512_cvtepi32_ps(words), zero));
    }
  }
}

// Four outputs of one row at a time share each tap's weight vector.
// The sums go to one row per channel (sums[lane * outSize + position]) or, channels-last, one row
// per position (sums[position * kLanes + lane]).
void sumBlock(const float* block, const PaddedPlane& p, const float* weights,
              const ir::ConvGeometry& g, const int64_t* tapOffsets, int64_t taps, int32_t* sums,
              int64_t outSize, bool channelsLast) {
  const int64_t oh = g.output[0], ow = g.output[1], sh = g.strides[0], sw = g.strides[1];
  const __m512i rowStarts =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(static_cast<int32_t>(outSize)));
  auto store = [&](int64_t position, __m512 acc) {
    if (channelsLast) {
      _mm512_storeu_si512(sums + position * kLanes, _mm512_cvtps_epi32(acc));
    } else {
      _mm512_i32scatter_epi32(sums + position, rowStarts, _mm512_cvtps_epi32(acc), 4);
    }
  };
  const int64_t step = sw * kLanes;
  for (int64_t oy = 0; oy < oh; ++oy) {
    const float* row = block + oy * sh * p.cols * kLanes;
    int64_t ox = 0;
    for (; ox + 4 <= ow; ox += 4) {
      __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      const float* at = row + ox * step;
      for (int64_t t = 0; t < taps; ++t) {
        const __m512 w = _mm512_loadu_ps(weights + t * kLanes);
        const float* x = at + tapOffsets[t];
        a0 = _mm512_fmadd_ps(w, _mm512_loadu_ps(x), a0);
        a1 = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + step), a1);
        a2 = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + 2 * step), a2);
        a3 = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + 3 * step), a3);
      }
      const int64_t position = oy * ow + ox;
      store(position, a0);
      store(position + 1, a1);
      store(position + 2, a2);
      store(position + 3, a3);
    }
    for (; ox < ow; ++ox) {
      __m512 a = _mm512_setzero_ps();
      const float* at = row + ox * step;
      for (int64_t t = 0; t < taps; ++t)
        a = _mm512_fmadd_ps(_mm512_loadu_ps(weights + t * kLanes),
                            _mm512_loadu_ps(at + tapOffsets[t]), a);
      store(oy * ow + ox, a);
    }
  }
}

void runQConvDepthwiseChannels(const QConvDepthwiseChannels& k, KernelContext& ctx) {
  const QConv& c = k.c;
  const int threads = poolThreads();
  const Shape& xs = ctx.input(static_cast<size_t>(c.s.a)).shape();
  const ir::ConvGeometry geometry = qconvGeometry(&ctx, c, xs);
  const PaddedPlane padded = paddedPlaneOf(geometry);
  const int64_t outSize = shapeNumel(geometry.output), taps = c.kernelSize;
  // The sums' scatter addresses lane * outSize in int32.
  if (outSize > INT32_MAX / kLanes)
    ctx.fail("output plane of " + std::to_string(outSize) + " positions is too large");
  // The block's gathers address lane * planeSize in int32 too.
  if (!c.channelsLast && shapeNumel(Shape(xs.begin() + 2, xs.end())) > INT32_MAX / kLanes)
    ctx.fail("input plane " + shapeToString(xs) + " is too large");
  uint8_t* ws = static_cast<uint8_t*>(ctx.workspace(workspaceBytes(c, padded, outSize, threads)));
  const uint64_t perThread = threadBytes(padded, outSize, taps);
  QConvCall call;
  if (!startQConvCall(ctx, c, 0, ws + static_cast<uint64_t>(threads) * perThread, call)) return;
  const ir::ConvGeometry& g = call.g;
  const int64_t ih = call.imageShape[0], iw = call.imageShape[1];
  std::vector<int64_t> tapOffsets(static_cast<size_t>(taps));
  for (int64_t ky = 0; ky < g.kernel[0]; ++ky) {
    for (int64_t kx = 0; kx < g.kernel[1]; ++kx) {
      tapOffsets[static_cast<size_t>(ky * g.kernel[1] + kx)] =
          (ky * g.dilations[0] * padded.cols + kx * g.dilations[1]) * kLanes;
    }
  }
  const int64_t channels = c.outChannels;
  const int64_t blocksPerImage = (channels + kLanes - 1) / kLanes;
  const int64_t items = call.batch * blocksPerImage;
  auto runItems = [&](int64_t part, int64_t i0, int64_t i1) {
    uint8_t* mine = ws + static_cast<uint64_t>(part) * perThread;
    float* block = reinterpret_cast<float*>(mine);
    int32_t* sums = reinterpret_cast<int32_t*>(mine + bytesOf(padded.floats()));
    float* weights =
        reinterpret_cast<float*>(mine + bytesOf(padded.floats()) + bytesOf(kLanes * outSize));
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t n = item / blocksPerImage, c0 = (item % blocksPerImage) * kLanes;
      const int64_t lanes = std::min(kLanes, channels - c0);
      const int64_t first = n * channels + c0;  // the block's first plane of X and of Y
      const int64_t lastX = n * call.imageSize * channels + c0;  // channels-last: its first byte
      if (c.channelsLast && c.xSigned) {
        fillBlockChannelsLast(static_cast<const int8_t*>(call.x->raw()) + lastX, ih, iw, channels,
                              lanes, call.xZero, g, padded, block);
      } else if (c.channelsLast) {
        fillBlockChannelsLast(static_cast<const uint8_t*>(call.x->raw()) + lastX, ih, iw, channels,
                              lanes, call.xZero, g, padded, block);
      } else if (c.xSigned) {
        fillBlock(static_cast<const int8_t*>(call.x->raw()) + first * call.imageSize, ih, iw, lanes,
                  call.xZero, g, padded, block);
      } else {
        fillBlock(static_cast<const uint8_t*>(call.x->raw()) + first * call.imageSize, ih, iw,
                  lanes, call.xZero, g, padded, block);
      }
      for (int64_t t = 0; t < taps; ++t) {
        for (int64_t lane = 0; lane < kLanes; ++lane) {
          const int64_t m = c0 + lane;
          weights[t * kLanes + lane] =
              lane < lanes ? static_cast<float>(k.w[static_cast<size_t>(m * taps + t)] -
                                                call.wZero[call.wZeroCount > 1 ? m : 0])
                           : 0.0f;
        }
      }
      sumBlock(block, padded, weights, g, tapOffsets.data(), taps, sums, outSize, c.channelsLast);
      QTileTerms terms;
      const int32_t* bias = call.bias ? call.bias + c0 : nullptr;
      const int64_t elem = static_cast<int64_t>(call.outElement);
      uint8_t* y = static_cast<uint8_t*>(call.y->raw());
      if (c.channelsLast) {
        terms.colAdd = bias;
        finishQTileAvx512(sums, kLanes, outSize, lanes, terms, call.out, false, c0,
                          y + (n * outSize * channels + c0) * elem, channels);
      } else {
        terms.rowAdd = bias;
        finishQTileAvx512(sums, outSize, lanes, outSize, terms, call.out, true, c0,
                          y + first * outSize * elem, outSize);
      }
    }
  };
  forEachThreadPart(items, threads, runItems);
}

}  // namespace

std::string qconvDepthwiseChannelsDeclines(const QConv& c) {
  if (c.wShape.size() != 4) return "not a 2-D convolution";
  if (c.groupOut != 1 || c.groupChannels != 1)
    return "not one input and one output channel per group";
  return "";
}

Kernel makeQConvDepthwiseChannels(const KernelCreateInfo& info, const QProductSignature& s) {
  auto k = std::make_shared<QConvDepthwiseChannels>();
  k->c = qconvOf(info, s);
  k->w = depthwiseWeights(info, s);
  Kernel kernel;
  kernel.run = [k](KernelContext& ctx) { runQConvDepthwiseChannels(*k, ctx); };
  kernel.workspace = [k](const std::vector<const Shape*>& shapes, int threads) -> uint64_t {
    const Shape* x = qconvInputShape(k->c, shapes);
    if (!x) return 0;
    const ir::ConvGeometry g = qconvGeometry(nullptr, k->c, *x);
    return workspaceBytes(k->c, paddedPlaneOf(g), shapeNumel(g.output), threads);
  };
  return kernel;
}

}  // namespace kiln::cpu
