// NchwcConv on 16-float vectors (one channel block per vector), group 1 or grouped in slices of
// whole blocks (nchwc_conv_grouped.h).
// A register block of M output blocks (M <= 4, a packed group) x P output pixels (consecutive in
// row-major order; P <= 6, 8 or 12 as M is 4, 3 or less) is M * P accumulators started from the
// bias. For each tap and input channel, M weight vectors are loaded and each pixel's input value
// is broadcast once into M FMAs; a pixel whose tap falls in the padding reads a block of zeros
// instead, so borders need no separate path. 1x1 stride-1 convolutions read their consecutive
// pixels from one pointer. Deep layers run input channels in slabs whose weights fit L1 (see
// convolveGroups); a slab's packed weights are contiguous, and those of the next slab are
// prefetched meanwhile. A plain (NCHW) X is convolved in nchwc_conv_plain_avx512.cpp instead.
// Residual, Relu and Clip are applied in registers before the one store; other activations run
// over each band of stored outputs while it is in L1. Depthwise convolutions are in
// nchwc_conv_depthwise_avx512.cpp.
#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "backends/cpu/activation_simd.h"
#include "backends/cpu/kernels/nchwc_conv.h"
#include "backends/cpu/kernels/nchwc_conv_avx512.h"
#include "backends/cpu/kernels/nchwc_conv_grouped.h"
#include "backends/cpu/kernels/nchwc_conv_tiling.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu::detail {
namespace {

// acc[m][p] += w[ci][m] * x_p[ci] for ci < count, weights [ci][M][16]. Left rolled: GCC
// then keeps the M * P accumulators in registers without shuffling them between iterations.
template <int M, int P>
inline void multiplyChannels(__m512 (&acc)[M][P], const float* const (&px)[P], const float* w,
                             int64_t count) {
  for (int64_t ci = 0; ci < count; ++ci) {
    __m512 wv[M];
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m) wv[m] = _mm512_loadu_ps(w + (ci * M + m) * kBlock);
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p) {
      const __m512 v = _mm512_set1_ps(px[p][ci]);
#pragma GCC unroll 4
      for (int m = 0; m < M; ++m) acc[m][p] = _mm512_fmadd_ps(wv[m], v, acc[m][p]);
    }
  }
}

// Software prefetch (into L2) of the packed weights the next slab of input channels, or the next
// group, will read: a few cache lines after each channel block of the current slab. Deep layers
// read each weight once per inference, from L3 or memory, and the hardware prefetchers do not run
// ahead of a slab that is read in a burst by its first chunk and then from L1. The kernels that
// prefetch are separate instances (Prefetch = true), so that the others' loops stay as they are.
struct WeightPrefetch {
  const char* next = nullptr;
  const char* end = nullptr;
  int64_t linesPerStep = 0;
  inline void step() {
    for (int64_t i = 0; i < linesPerStep && next < end; ++i, next += 64)
      _mm_prefetch(next, _MM_HINT_T1);
  }
};

// Adds to acc the taps of a blocked X over input channels [c0, c1) (whole blocks but the last):
// for each tap, each 16-channel block of each pixel.
template <int M, int P, bool Prefetch>
inline void accumulateBlocked(const NchwcConvShape& s, const ChunkOrigins<P>& origins,
                              const float* x, const float* group, int64_t c0, int64_t c1,
                              WeightPrefetch& prefetch, __m512 (&acc)[M][P]) {
  const int64_t inPlane = s.height * s.width;
  int64_t off[P];
  const float* px[P];
  for (int64_t ky = 0; ky < s.kernelH; ++ky) {
    for (int64_t kx = 0; kx < s.kernelW; ++kx) {
      if (!origins.tapOffsets(s, ky, kx, off)) continue;
      const int64_t tap = ky * s.kernelW + kx;
      for (int64_t c = c0; c < c1; c += kBlock) {
        const float* plane = x + c * inPlane;
#pragma GCC unroll 16
        for (int p = 0; p < P; ++p) px[p] = off[p] < 0 ? kNchwcZeros : plane + off[p] * kBlock;
        multiplyChannels<M, P>(acc, px, group + nchwcBlockedWeightOffset(s.taps(), tap, c, M),
                               std::min(kBlock, c1 - c));
        if constexpr (Prefetch) prefetch.step();
      }
    }
  }
}

// A 1x1 stride-1 convolution (NchwcConvShape::pointwise): the chunk's pixels are consecutive in
// X as in Y, so one pointer serves them all. (Software prefetch of the next chunk's X, of the
// residual or of Y, and a fully unrolled 16-channel loop, measured no faster in whole models.)
template <int M, int P, bool Prefetch>
inline void accumulatePointwise(const NchwcConvShape& s, int64_t q0, const float* x,
                                const float* group, int64_t c0, int64_t c1,
                                WeightPrefetch& prefetch, __m512 (&acc)[M][P]) {
  const int64_t inPlane = s.height * s.width;
  for (int64_t c = c0; c < c1; c += kBlock) {
    const float* plane = x + (c * inPlane + q0 * kBlock);
    const float* w = group + c * M * kBlock;
    multiplyStrided<M, P, kBlock>(acc, plane, w, std::min(kBlock, c1 - c));
    if constexpr (Prefetch) prefetch.step();
  }
}

// Input channels [begin, end) of the sum: the sum starts from the bias on the first slab and
// from the partial sums stored in Y on the others; only the last one applies the epilogue.
struct ChannelSlab {
  int64_t begin = 0, end = 0;
  bool first = true, last = true;
};

// Output blocks b0 .. b0 + M - 1 (packed weights at `group`) for pixels q0 .. q0 + P - 1 of
// `image`.
template <int M, int P, bool Prefetch>
void convolveChunk(const NchwcConvArgs& a, const RegisterEpilogue& epi, int64_t image, int64_t b0,
                   const float* group, int64_t q0, const ChannelSlab& slab,
                   WeightPrefetch& prefetch) {
  const NchwcConvShape& s = *a.shape;
  const int64_t outPlane = s.outHeight * s.outWidth;
  const int64_t blockStride = outPlane * kBlock;
  const int64_t tile =
      ((image * s.outBlocks() + b0) * outPlane + q0) * kBlock;  // block b0, pixel q0
  __m512 acc[M][P];
  if (slab.first) {
    startFromBias<M, P>(acc, a.bias, a.residual ? a.residual + tile : nullptr, blockStride, b0,
                        s.outChannels);
  } else {
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m) {
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p)
        acc[m][p] = _mm512_loadu_ps(a.y + tile + m * blockStride + p * kBlock);
    }
  }
  const int64_t inPlane = s.height * s.width;
  if (s.pointwise()) {
    accumulatePointwise<M, P, Prefetch>(s, q0, a.x + image * inPlane * s.inBlocks() * kBlock, group,
                                        slab.begin, slab.end, prefetch, acc);
  } else {
    accumulateBlocked<M, P, Prefetch>(s, ChunkOrigins<P>(s, q0, P),
                                      a.x + image * inPlane * s.inBlocks() * kBlock, group,
                                      slab.begin, slab.end, prefetch, acc);
  }
  if (slab.last) return storeTile<M, P>(epi, acc, a.y + tile, blockStride);
#pragma GCC unroll 4
  for (int m = 0; m < M; ++m) {  // partial sums, for the next slab
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p)
      _mm512_storeu_ps(a.y + tile + m * blockStride + p * kBlock, acc[m][p]);
  }
}

// convolveChunk<M, n> for the run-time n <= P.
template <int M, int P, bool Prefetch>
void convolveChunkOfSize(const NchwcConvArgs& a, const RegisterEpilogue& epi, int64_t image,
                         int64_t b0, const float* group, int64_t q0, int64_t n,
                         const ChannelSlab& slab, WeightPrefetch& prefetch) {
  if constexpr (P > 1) {
    if (n < P)
      return convolveChunkOfSize<M, P - 1, Prefetch>(a, epi, image, b0, group, q0, n, slab,
                                                     prefetch);
  }
  convolveChunk<M, P, Prefetch>(a, epi, image, b0, group, q0, slab, prefetch);
}

// Bytes of packed weights one group's slab of input channels may take, so that they stay in L1
// while a band of chunks runs over them.
constexpr int64_t kSlabWeightBytes = 32 << 10;
// Output pixels in a band: its partial sums (M blocks each) stay in L1 or L2 between slabs.
// Each band of a group reads all of the group's weights again, so a wide band saves weight
// traffic in deep layers: 128 measured 3-6 % faster than 64 on ResNet-50's 1x1 layers (14 x 14,
// 1024->256, whose 1 MB of weights are read 2 times instead of 4), and no slower elsewhere.
constexpr int64_t kBandPixels = 128;
// All output groups' weights up to this size are read from L2 by band-major tasks (see
// convolveGroups).
constexpr int64_t kBandMajorWeightBytes = 1 << 20;

// Tasks are (image and slice, group of output blocks, band of pixel chunks): each slice of a
// grouped convolution is a convolution of its own (nchwc_conv_grouped.h). When a group's weights
// for all input channels are larger than kSlabWeightBytes, the input channels are cut into slabs
// and each band runs slab by slab, so that the weights come from L1 rather than L2 (deep layers:
// 512 channels x 3 x 3 are 1.2 MB per group). Otherwise a band is one chunk, unless an
// activation runs over the stored band. Bands shrink so that each thread gets a few tasks.
void convolveGroups(const NchwcConvArgs& whole) {
  const int64_t slices = whole.shape->slices(), images = whole.shape->batch * slices;
  const NchwcConvShape s = nchwcSliceShape(*whole.shape, 0);  // the sizes of every slice's blocks
  const RegisterEpilogue epi(whole.act);
  const int64_t outBlocks = s.outBlocks(), groups = nchwcOutBlockGroups(outBlocks);
  const int64_t widest = nchwcOutBlockGroup(outBlocks, groups - 1).end -
                         nchwcOutBlockGroup(outBlocks, groups - 1).begin;
  const ConvPixelChunks chunks(s, maxRegisterPixels(widest));
  const int64_t ciStride = s.inBlocks() * kBlock;
  const int64_t blockFloats = s.taps() * ciStride * kBlock;  // one output block's packed weights
  const int64_t channelBytes =
      chunks.liveTaps(s) * widest * kBlock * int64_t(sizeof(float));  // per input channel and chunk
  const int64_t slabChannels =
      std::max<int64_t>(kBlock, kSlabWeightBytes / channelBytes / kBlock * kBlock);
  // Bands of several chunks when the channels come in slabs, or when an activation such as SiLU
  // runs over the stored outputs (once per band and block rather than once per chunk).
  const bool wideBands = slabChannels < s.inChannels || epi.rest;
  int64_t bandChunks =
      wideBands ? std::max<int64_t>(1, kBandPixels / maxRegisterPixels(widest)) : 1;
  // A few tasks per thread, so that small maps with few groups (7 x 7, 160 outputs) still keep
  // every thread busy; only two where the weights outweigh X, since each band of a group reads
  // all of the group's weights again.
  const int64_t weightBytes = outBlocks * blockFloats * int64_t(sizeof(float));
  const int64_t inputBytes = s.height * s.width * ciStride * int64_t(sizeof(float));
  const int64_t tasksPerThread = weightBytes > inputBytes ? 2 : 4;
  const ThreadPool* pool = currentThreadPool();
  const int64_t wantedBands =
      (tasksPerThread * (pool ? pool->size() : 1) + images * groups - 1) / (images * groups);
  bandChunks = std::clamp<int64_t>(chunks.count / wantedBands, 1, bandChunks);
  const int64_t bands = (chunks.count + bandChunks - 1) / bandChunks;
  const int64_t ciPadded = s.inBlocks() * kBlock;
  // Task order. Group-major (bands fastest) reads each group's weights once while the input
  // streams past, and prefetches the weights that follow; band-major (groups fastest) reads each
  // band of input once while all the weights stay in L2, and gives each thread part of the image
  // rather than part of the output channels, so two threads do not both stream all of X. It
  // writes all output blocks at once, though, which costs more than it saves where the output
  // is larger than the input (ResNet-50's channel-expanding 1x1 convs).
  const int64_t outputBytes =
      s.outHeight * s.outWidth * outBlocks * kBlock * int64_t(sizeof(float));
  const bool bandMajor = groups > 1 && weightBytes <= kBandMajorWeightBytes &&
                         weightBytes <= inputBytes && outputBytes <= inputBytes;
  parallelFor(images * groups * bands, [&](int64_t t0, int64_t t1) {
    const auto runTask = [&](int64_t task, int64_t g, int64_t band) {
      const NchwcConvShape slice = nchwcSliceShape(*whole.shape, task % slices);
      const NchwcConvArgs a = nchwcSliceArgs(whole, slice, task / slices, task % slices);
      const int64_t image = 0;  // a's pointers are at the slice of its image
      const float* weightsEnd = a.weights + outBlocks * blockFloats;
      const NchwcBlockRange r = nchwcOutBlockGroup(outBlocks, g);
      const float* group = a.weights + r.begin * blockFloats;
      const int64_t c0 = band * bandChunks, c1 = std::min(chunks.count, c0 + bandChunks);
      for (int64_t begin = 0; begin < slice.inChannels; begin += slabChannels) {
        const ChannelSlab slab{begin, std::min(slice.inChannels, begin + slabChannels), begin == 0,
                               begin + slabChannels >= slice.inChannels};
        // The first band of a group fetches the group's slabs (the others find them in L2) and
        // the last band then leads into the next group: they prefetch the weights that follow.
        WeightPrefetch prefetch;
        if (!bandMajor && (slab.last ? band + 1 == bands : band == 0)) {
          const int64_t m = r.end - r.begin, ciEnd = std::min(ciPadded, begin + slabChannels);
          const float* slabEnd = group + ciEnd * s.taps() * m * kBlock;
          const int64_t floats =
              std::min<int64_t>(weightsEnd - slabEnd, (ciEnd - begin) * s.taps() * m * kBlock);
          prefetch.next = reinterpret_cast<const char*>(slabEnd);
          prefetch.end = reinterpret_cast<const char*>(slabEnd + floats);
          const int64_t lines = floats * int64_t(sizeof(float)) / 64;
          const int64_t steps = (c1 - c0) * ((ciEnd - begin) / kBlock) * s.taps();
          prefetch.linesPerStep = (lines + steps - 1) / steps;
        }
        // Output blocks r.begin .. r.end - 1 for chunk c, prefetching or not.
        auto convolve = [&](auto prefetching, int64_t c) {
          constexpr bool kOn = decltype(prefetching)::value;
          const int64_t q0 = chunks.begin(c), n = chunks.length(c);
          const int64_t b0 = r.begin;
          switch (r.end - r.begin) {
            case 4:
              return convolveChunkOfSize<4, maxRegisterPixels(4), kOn>(a, epi, image, b0, group, q0,
                                                                       n, slab, prefetch);
            case 3:
              return convolveChunkOfSize<3, maxRegisterPixels(3), kOn>(a, epi, image, b0, group, q0,
                                                                       n, slab, prefetch);
            case 2:
              return convolveChunkOfSize<2, maxRegisterPixels(2), kOn>(a, epi, image, b0, group, q0,
                                                                       n, slab, prefetch);
            default:
              return convolveChunkOfSize<1, maxRegisterPixels(1), kOn>(a, epi, image, b0, group, q0,
                                                                       n, slab, prefetch);
          }
        };
        for (int64_t c = c0; c < c1; ++c) {
          if (prefetch.linesPerStep > 0)
            convolve(std::true_type{}, c);
          else
            convolve(std::false_type{}, c);
        }
      }
      if (epi.rest) {  // the band's pixels are contiguous in each output block
        const int64_t q0 = chunks.begin(c0), q1 = chunks.begin(c1 - 1) + chunks.length(c1 - 1);
        for (int64_t b = r.begin; b < r.end; ++b) {
          float* y = a.y + ((image * outBlocks + b) * s.outHeight * s.outWidth + q0) * kBlock;
          applyEpilogueAvx512(a.act, y, (q1 - q0) * kBlock, nullptr, false, nullptr);
        }
      }
    };
    if (bandMajor) {
      forEachChunkTask(t0, t1, bands, groups,
                       [&](int64_t task, int64_t band, int64_t g) { runTask(task, g, band); });
    } else {
      forEachChunkTask(t0, t1, groups, bands, runTask);
    }
  });
}

}  // namespace

void nchwcConvAvx512(const NchwcConvArgs& a) {
  if (a.shape->depthwise) return nchwcDepthwiseAvx512(a);
  convolveGroups(a);
}

}  // namespace kiln::cpu::detail
