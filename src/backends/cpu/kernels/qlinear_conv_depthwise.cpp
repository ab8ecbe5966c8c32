// The direct depthwise candidate of QLinearConv and ConvInteger (one input channel per group):
// each output channel accumulates (x - x_zp) * (w - w_zp) tap by tap into an int32 plane of the
// workspace, vectorized over the positions of an output row (the loop the compiler widens to
// AVX2; 2-D convolutions walk rows directly, others through forEachPatchRun), then finishes the
// plane with the GEMM's epilogue. Padding taps are skipped: they would add
// (x_zp - x_zp) * w = 0. The weights are few (channels x taps), kept as int16 copies.
#include <algorithm>

#include "backends/cpu/gemm/im2col.h"
#include "backends/cpu/kernels/qconv_common.h"
#include "backends/cpu/kernels/qgemm_op_support.h"
#include "backends/cpu/qgemm/qgemm_epilogue.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

struct QConvDepthwise {
  QConv c;
  std::vector<int16_t> w;  // outChannels x kernelSize, as W stores them
};

int currentThreads() {
  const ThreadPool* pool = currentThreadPool();
  return pool ? pool->size() : 1;
}

uint64_t rowBytes(int64_t outSize) { return alignTo64(static_cast<uint64_t>(outSize) * 4); }

// One int32 row per thread, then the per-channel parameters.
uint64_t workspaceBytes(const QConvDepthwise& k, int64_t outSize, int threads) {
  return static_cast<uint64_t>(std::max(threads, 1)) * rowBytes(outSize) + qconvParamBytes(k.c);
}

// The 2-D case with plain loops: for each output row, each tap inside the image adds its
// contiguous (stride 1) or strided run of one input row.
template <typename T>
void accumulateChannel2d(const QConvCall& call, const T* image, const int16_t* w, int32_t wZero, int32_t* acc) {
  const ir::ConvGeometry& g = call.g;
  const int64_t ih = call.imageShape[0], iw = call.imageShape[1], oh = g.output[0], ow = g.output[1];
  const int64_t kh = g.kernel[0], kw = g.kernel[1], sh = g.strides[0], sw = g.strides[1];
  const int32_t xZero = call.xZero;
  std::fill(acc, acc + oh * ow, 0);
  for (int64_t oy = 0; oy < oh; ++oy) {
    int32_t* dst = acc + oy * ow;
    for (int64_t ky = 0; ky < kh; ++ky) {
      const int64_t iy = oy * sh - g.padsBegin[0] + ky * g.dilations[0];
      if (iy < 0 || iy >= ih) continue;
      const T* row = image + iy * iw;
      for (int64_t kx = 0; kx < kw; ++kx) {
        // Output columns ox with 0 <= ox * sw + shift < iw.
        const int64_t shift = kx * g.dilations[1] - g.padsBegin[1];
        const int64_t lo = std::min(ow, shift >= 0 ? 0 : (-shift + sw - 1) / sw);
        const int64_t hi = std::clamp<int64_t>(iw - 1 - shift < 0 ? 0 : (iw - 1 - shift) / sw + 1, lo, ow);
        const int32_t wk = static_cast<int32_t>(w[ky * kw + kx]) - wZero;
        if (sw == 1) {
          const T* src = row + shift;
          for (int64_t ox = lo; ox < hi; ++ox) dst[ox] += wk * (static_cast<int32_t>(src[ox]) - xZero);
        } else {
          for (int64_t ox = lo; ox < hi; ++ox) dst[ox] += wk * (static_cast<int32_t>(row[ox * sw + shift]) - xZero);
        }
      }
    }
  }
}

template <typename T>
void accumulateChannel(const QConvCall& call, const T* image, const int16_t* w, int32_t wZero, int32_t* acc) {
  if (call.imageShape.size() == 2) return accumulateChannel2d(call, image, w, wZero, acc);
  const ir::ConvGeometry& g = call.g;
  const int64_t stride = g.strides.back();
  const int32_t xZero = call.xZero;
  std::fill(acc, acc + call.outSize, 0);
  forEachPatchRun(call.imageShape, g.output, g, [&](int64_t k, int64_t start, int64_t base, int64_t lo, int64_t hi) {
    const int32_t wk = static_cast<int32_t>(w[k]) - wZero;
    int32_t* dst = acc + start;
    if (stride == 1) {
      const T* src = image + base;
      for (int64_t o = lo; o < hi; ++o) dst[o] += wk * (static_cast<int32_t>(src[o]) - xZero);
    } else {
      for (int64_t o = lo; o < hi; ++o) dst[o] += wk * (static_cast<int32_t>(image[base + o * stride]) - xZero);
    }
  });
}

void runQConvDepthwise(const QConvDepthwise& k, KernelContext& ctx) {
  const QConv& c = k.c;
  const int threads = currentThreads();
  const ir::ConvGeometry g = qconvGeometry(&ctx, c, ctx.input(static_cast<size_t>(c.s.a)).shape());
  const int64_t outSize = shapeNumel(g.output);
  uint8_t* ws = static_cast<uint8_t*>(ctx.workspace(workspaceBytes(k, outSize, threads)));
  QConvCall call;
  if (!startQConvCall(ctx, c, 0, ws + static_cast<uint64_t>(threads) * rowBytes(outSize), call)) return;
  const int64_t rows = call.batch * c.outChannels;
  const int64_t channels = c.attrs.group;  // one input channel per group
  auto channelRows = [&](int64_t part, int64_t r0, int64_t r1) {
    int32_t* acc = reinterpret_cast<int32_t*>(ws + static_cast<uint64_t>(part) * rowBytes(outSize));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / c.outChannels, m = r % c.outChannels;
      const int64_t offset = (n * channels + m / c.groupOut) * call.imageSize;
      const int16_t* w = k.w.data() + m * c.kernelSize;
      const int32_t wZero = call.wZero[call.wZeroCount > 1 ? m : 0];
      if (c.xSigned) {
        accumulateChannel(call, static_cast<const int8_t*>(call.x->raw()) + offset, w, wZero, acc);
      } else {
        accumulateChannel(call, static_cast<const uint8_t*>(call.x->raw()) + offset, w, wZero, acc);
      }
      QTileTerms terms;
      terms.rowAdd = call.bias ? call.bias + m : nullptr;
      void* y = static_cast<uint8_t*>(call.y->raw()) + r * outSize * static_cast<int64_t>(call.outElement);
      finishQTile(acc, outSize, 1, outSize, terms, call.out, true, m, y, outSize);
    }
  };
  ThreadPool* pool = currentThreadPool();
  const int64_t parts = std::min<int64_t>(threads, rows);
  if (pool && parts > 1) {
    pool->parallelFor(parts, [&](int64_t p0, int64_t p1) {
      for (int64_t part = p0; part < p1; ++part) channelRows(part, part * rows / parts, (part + 1) * rows / parts);
    });
  } else {
    channelRows(0, 0, rows);
  }
}

}  // namespace

Kernel makeQConvDepthwise(const KernelCreateInfo& info, const QProductSignature& s) {
  auto k = std::make_shared<QConvDepthwise>();
  k->c = qconvOf(info, s);
  const Tensor& w = *constantInput(info, s.b);
  k->w.resize(static_cast<size_t>(w.numel()));
  for (int64_t i = 0; i < w.numel(); ++i) {
    k->w[static_cast<size_t>(i)] = w.dtype() == DataType::kInt8 ? w.data<int8_t>()[i] : w.data<uint8_t>()[i];
  }
  Kernel kernel;
  kernel.run = [k](KernelContext& ctx) { runQConvDepthwise(*k, ctx); };
  const int input = s.a;
  kernel.workspace = [k, input](const std::vector<const Shape*>& shapes, int threads) -> uint64_t {
    const Shape* x = static_cast<size_t>(input) < shapes.size() ? shapes[static_cast<size_t>(input)] : nullptr;
    if (!x || x->size() != k->c.wShape.size()) return 0;
    return workspaceBytes(*k, shapeNumel(qconvGeometry(nullptr, k->c, *x).output), threads);
  };
  return kernel;
}

}  // namespace kiln::cpu
