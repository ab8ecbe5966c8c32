// The integer-GEMM candidates of QLinearConv and ConvInteger (qgemm_ops.h): per image and group,
// C[groupOut x positions] = W x columns with W the packed left operand (so C is NCHW as it is).
// A 1x1 convolution with stride 1 and no padding reads X itself as the columns; any other one
// gathers them by im2col into the workspace, padding with X's zero point (a padded tap then
// contributes (zp - zp) * w = 0, as ONNX's zero-point padding says). First layers (few input
// channels, large kernels) take the im2col candidate: their K = channels x taps is small but
// their positions many, which is the GEMM's best shape anyway.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/gemm/im2col.h"
#include "backends/cpu/kernels/qconv_common.h"
#include "backends/cpu/kernels/qgemm_op_support.h"
#include "backends/cpu/thread_pool.h"
#include "ir/node_attrs.h"

namespace kiln::cpu {
namespace {

bool isPointwiseGeometry(const ir::ConvGeometry& g) {
  for (size_t d = 0; d < g.kernel.size(); ++d) {
    if (g.kernel[d] != 1 || g.strides[d] != 1 || g.padsBegin[d] != 0 || g.padsEnd[d] != 0)
      return false;
  }
  return true;
}

// dst[ox] = src[2 * ox] for ox in [lo, hi), 16 at a time from 32 bytes while they lie below
// src[available] (the end of the input row).
void copyEvenBytes(const uint8_t* src, int64_t lo, int64_t hi, int64_t available, uint8_t* dst) {
  const __m128i even = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1);
  int64_t ox = lo;
  for (; ox + 16 <= hi && 2 * ox + 32 <= available; ox += 16) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * ox));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * ox + 16));
    const __m128i r = _mm_unpacklo_epi64(_mm_shuffle_epi8(a, even), _mm_shuffle_epi8(b, even));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + ox), r);
  }
  for (; ox < hi; ++ox) dst[ox] = src[2 * ox];
}

// im2col (gemm/im2col.h's layout: row (c, ky, kx), one column per output position) of a 2-D
// image of bytes with plain loops: each output row of a tap is a copy of part of one input row
// between padding, without im2col.h's bookkeeping for any rank.
void im2colBytes2d(const uint8_t* image, int64_t channels, const QConvCall& call, uint8_t pad,
                   uint8_t* col) {
  const ir::ConvGeometry& g = call.g;
  const int64_t ih = call.imageShape[0], iw = call.imageShape[1], oh = g.output[0],
                ow = g.output[1];
  const int64_t kh = g.kernel[0], kw = g.kernel[1], sh = g.strides[0], sw = g.strides[1];
  for (int64_t c = 0; c < channels; ++c) {
    const uint8_t* plane = image + c * ih * iw;
    for (int64_t ky = 0; ky < kh; ++ky) {
      for (int64_t kx = 0; kx < kw; ++kx) {
        uint8_t* dst = col + ((c * kh + ky) * kw + kx) * oh * ow;
        const int64_t shift = kx * g.dilations[1] - g.padsBegin[1];
        const int64_t lo = std::min(ow, shift >= 0 ? 0 : (-shift + sw - 1) / sw);
        const int64_t hi =
            std::clamp<int64_t>(iw - 1 - shift < 0 ? 0 : (iw - 1 - shift) / sw + 1, lo, ow);
        for (int64_t oy = 0; oy < oh; ++oy, dst += ow) {
          const int64_t iy = oy * sh - g.padsBegin[0] + ky * g.dilations[0];
          if (iy < 0 || iy >= ih) {
            std::memset(dst, pad, static_cast<size_t>(ow));
            continue;
          }
          const uint8_t* src = plane + iy * iw + shift;
          std::memset(dst, pad, static_cast<size_t>(lo));
          if (sw == 1) {
            std::memcpy(dst + lo, src + lo, static_cast<size_t>(hi - lo));
          } else if (sw == 2) {
            copyEvenBytes(src, lo, hi, iw - shift, dst);
          } else {
            for (int64_t ox = lo; ox < hi; ++ox) dst[ox] = src[ox * sw];
          }
          std::memset(dst + hi, pad, static_cast<size_t>(ow - hi));
        }
      }
    }
  }
}

struct QConvGemm {
  QConv c;
  bool pointwise = false;
  std::vector<PackedQMatrix> w;  // one per group
};

int currentThreads() {
  const ThreadPool* pool = currentThreadPool();
  return pool ? pool->size() : 1;
}

uint64_t columnBytes(const QConvGemm& k, int64_t outSize) {
  return k.pointwise ? 0 : alignTo64(static_cast<uint64_t>(k.c.depth * outSize));
}

// Workspace: qgemm's, the im2col columns, the per-channel parameters.
uint64_t workspaceBytes(const QConvGemm& k, int64_t outSize, int threads) {
  return alignTo64(qgemmWorkspaceBytes(QSide::kLeft, k.w[0].isa(), k.c.groupOut, outSize, k.c.depth,
                                       threads)) +
         columnBytes(k, outSize) + qconvParamBytes(k.c);
}

void runQConvGemm(const QConvGemm& k, KernelContext& ctx) {
  const QConv& c = k.c;
  const int threads = currentThreads();
  const ir::ConvGeometry g = qconvGeometry(&ctx, c, ctx.input(static_cast<size_t>(c.s.a)).shape());
  const int64_t outSize = shapeNumel(g.output);
  uint8_t* ws = static_cast<uint8_t*>(ctx.workspace(workspaceBytes(k, outSize, threads)));
  uint8_t* columns = ws + alignTo64(qgemmWorkspaceBytes(QSide::kLeft, k.w[0].isa(), c.groupOut,
                                                        outSize, c.depth, threads));
  QConvCall call;
  if (!startQConvCall(ctx, c, k.w[0].sourceUnsigned() ? -128 : 0, columns + columnBytes(k, outSize),
                      call))
    return;
  const int32_t xZero = c.xSigned ? call.xZero + 128 : call.xZero;
  const int64_t channels = c.groupChannels * c.attrs.group;
  const uint8_t* x = static_cast<const uint8_t*>(call.x->raw());
  uint8_t* y = static_cast<uint8_t*>(call.y->raw());
  const uint8_t pad = static_cast<uint8_t>(call.xZero);  // the zero point's bits, as X stores it
  for (int64_t n = 0; n < call.batch; ++n) {
    for (int64_t gi = 0; gi < c.attrs.group; ++gi) {
      const uint8_t* image = x + (n * channels + gi * c.groupChannels) * call.imageSize;
      QGemmProblem p;
      p.M = c.groupOut;
      p.N = outSize;
      p.K = c.depth;
      p.weights = &k.w[static_cast<size_t>(gi)];
      if (k.pointwise) {
        p.activations = {image, 1, call.imageSize, c.xSigned};
      } else {
        parallelFor(c.groupChannels, [&](int64_t c0, int64_t c1) {
          uint8_t* dst = columns + c0 * c.kernelSize * outSize;
          if (call.imageShape.size() == 2) {
            im2colBytes2d(image + c0 * call.imageSize, c1 - c0, call, pad, dst);
          } else {
            im2col(image + c0 * call.imageSize, c1 - c0, call.imageShape, call.g.output, call.g,
                   dst, pad);
          }
        });
        p.activations = {columns, 1, outSize, c.xSigned};
      }
      const int64_t channel0 = gi * c.groupOut;
      p.zeroLeft = call.wZero + (call.wZeroCount > 1 ? channel0 : 0);
      p.zeroLeftCount = call.wZeroCount > 1 ? c.groupOut : 1;
      p.zeroRight = &xZero;
      p.bias = call.bias ? call.bias + channel0 : nullptr;
      p.output = call.out;
      if (call.out.scale && call.out.scaleCount > 1) p.output.scale += channel0;
      if (call.out.floatBias) p.output.floatBias += channel0;
      p.C = y + ((n * c.outChannels + channel0) * outSize) * static_cast<int64_t>(call.outElement);
      p.ldc = outSize;
      qgemm(p, ws);
    }
  }
}

Kernel makeQConvGemm(const KernelCreateInfo& info, CpuIsa isa, const QProductSignature& s,
                     bool pointwise, const KernelState* saved) {
  auto k = std::make_shared<QConvGemm>();
  k->c = qconvOf(info, s);
  k->pointwise = pointwise;
  const QConv& c = k->c;
  const Tensor& w = *constantInput(info, s.b);
  for (int64_t gi = 0; gi < c.attrs.group; ++gi) {
    if (saved) {
      k->w.push_back(savedQWeights(info.node, *saved, static_cast<size_t>(gi), QSide::kLeft, isa,
                                   c.groupOut, c.depth));
    } else {
      const uint8_t* src = static_cast<const uint8_t*>(w.raw()) + gi * c.groupOut * c.depth;
      k->w.push_back(packQWeights(QSide::kLeft, isa, c.groupOut, c.depth,
                                  {src, c.depth, 1, w.dtype() == DataType::kInt8}));
    }
  }
  info.keepsOwnCopyOf(static_cast<size_t>(s.b));
  Kernel kernel;
  kernel.run = [k](KernelContext& ctx) { runQConvGemm(*k, ctx); };
  const int input = s.a;
  kernel.workspace = [k, input](const std::vector<const Shape*>& shapes, int threads) -> uint64_t {
    const Shape* x =
        static_cast<size_t>(input) < shapes.size() ? shapes[static_cast<size_t>(input)] : nullptr;
    if (!x || x->size() != k->c.wShape.size()) return 0;
    return workspaceBytes(*k, shapeNumel(qconvGeometry(nullptr, k->c, *x).output), threads);
  };
  kernel.save = [k] {
    KernelState state;
    for (const PackedQMatrix& m : k->w) {
      const std::vector<uint8_t> params = m.params();
      state.params.insert(state.params.end(), params.begin(), params.end());
      state.blobs.push_back(blobOf(m));
    }
    state.owner = k;
    return state;
  };
  return kernel;
}

// Why the node is not for a GEMM variant ("" when it is).
std::string gemmDeclines(const KernelCreateInfo& info, const QProductSignature& s, bool pointwise) {
  std::string reason = qproductDeclines(info, s, 0);
  if (!reason.empty()) return reason;
  const Tensor& w = *constantInput(info, s.b);
  if (w.rank() < 3) return "W " + w.describe() + " has no spatial dimensions";
  if (!pointwise) return "";
  const QConv c = qconvOf(info, s);
  if (!c.attrs.geometry) return "the spatial sizes are not static";
  if (!isPointwiseGeometry(*c.attrs.geometry))
    return "not a 1x1 convolution with stride 1 and no padding";
  return "";
}

KernelCandidate gemmCandidate(const std::string& prefix, CpuIsa isa, QSignatureFn signature,
                              bool pointwise) {
  KernelCandidate cand;
  cand.id = qkernelId(prefix + (pointwise ? "_pointwise" : "_im2col"), isa);
  cand.isa = isa;
  cand.supports = [signature, pointwise](const KernelCreateInfo& info) {
    return gemmDeclines(info, signature(info.node), pointwise);
  };
  cand.create = [isa, signature, pointwise](const KernelCreateInfo& info) {
    return makeQConvGemm(info, isa, signature(info.node), pointwise, nullptr);
  };
  cand.restore = [isa, signature, pointwise](const KernelCreateInfo& info,
                                             const KernelState& state) {
    return makeQConvGemm(info, isa, signature(info.node), pointwise, &state);
  };
  return cand;
}

QProductSignature qlinearConvSignature(const ir::Node&) {
  QProductSignature s;
  s.a = 0, s.aScale = 1, s.aZero = 2, s.b = 3, s.bScale = 4, s.bZero = 5, s.yScale = 6, s.yZero = 7,
  s.bias = 8;
  return s;
}

const bool kRegistered = [] {
  KernelRegistry& r = KernelRegistry::global();
  for (DataType dtype : {DataType::kUint8, DataType::kInt8}) {  // X's type
    const std::string x = qactivationsPrefix(dtype);
    for (KernelCandidate& c : qconvCandidates(x + "_qlinearconv", qlinearConvSignature)) {
      r.addCandidate("", "QLinearConv", dtype, std::move(c));
    }
    for (KernelCandidate& c : qconvCandidates(x + "_convinteger", integerProductSignature)) {
      r.addCandidate("", "ConvInteger", dtype, std::move(c));
    }
  }
  return true;
}();

}  // namespace

namespace {

// Why neither depthwise candidate can run the node ("" if they can).
std::string depthwiseDeclines(const KernelCreateInfo& info, const QProductSignature& s) {
  std::string reason = qproductDeclines(info, s, 0);
  if (!reason.empty()) return reason;
  const Tensor& w = *constantInput(info, s.b);
  if (w.rank() < 3) return "W " + w.describe() + " has no spatial dimensions";
  if (w.dim(1) != 1) return "not one input channel per group";
  if (w.numel() / w.dim(0) > kMaxDepthwiseTaps)
    return "more than " + std::to_string(kMaxDepthwiseTaps) + " taps";
  return "";
}

}  // namespace

std::vector<KernelCandidate> qconvCandidates(const std::string& prefix, QSignatureFn signature) {
  std::vector<KernelCandidate> list;
  list.push_back(qconvNhwcCandidate(prefix, signature));
  list.push_back(qconvDepthwiseNhwcCandidate(prefix, signature));
  KernelCandidate channels;
  channels.id = prefix + "_depthwise_avx512";
  channels.isa = CpuIsa::kAvx512;
  channels.supports = [signature](const KernelCreateInfo& info) -> std::string {
    const QProductSignature s = signature(info.node);
    const std::string reason = depthwiseDeclines(info, s);
    return reason.empty() ? qconvDepthwiseChannelsDeclines(qconvOf(info, s)) : reason;
  };
  channels.create = [signature](const KernelCreateInfo& info) {
    return makeQConvDepthwiseChannels(info, signature(info.node));
  };
  list.push_back(std::move(channels));
  KernelCandidate depthwise;
  depthwise.id = prefix + "_depthwise_avx2";
  depthwise.isa = CpuIsa::kAvx2;
  depthwise.supports = [signature](const KernelCreateInfo& info) {
    return depthwiseDeclines(info, signature(info.node));
  };
  depthwise.create = [signature](const KernelCreateInfo& info) {
    return makeQConvDepthwise(info, signature(info.node));
  };
  list.push_back(std::move(depthwise));
  for (bool pointwise : {true, false}) {
    for (CpuIsa isa : {CpuIsa::kAvx512Vnni, CpuIsa::kAvxVnni, CpuIsa::kAvx2}) {
      list.push_back(gemmCandidate(prefix, isa, signature, pointwise));
    }
  }
  // Only the first three candidates read channels-last X and Y.
  for (size_t i = 3; i < list.size(); ++i) {
    list[i].supports = [supports = list[i].supports](const KernelCreateInfo& info) {
      if (ir::attrInt(info.node, "channels_last", 0) != 0) return std::string("X is channels-last");
      return supports(info);
    };
  }
  return list;
}

}  // namespace kiln::cpu
