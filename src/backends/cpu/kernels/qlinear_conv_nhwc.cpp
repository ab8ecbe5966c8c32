// The channels-last candidate `<prefix>_nhwc_avx512vnni` of the integer convolutions (qgemm_ops.h):
// kiln::QConv nodes with channels_last = 1 (opt/nhwc_int8_layout.cpp makes them), run by the
// direct NHWC kernel (backends/cpu/qgemm/qconv_nhwc.h). W is reordered to [out channel][tap]
// [input channel] and packed as the kernel's right operand when the kernel is made; plans keep it.
#include <algorithm>
#include <memory>

#include "backends/cpu/kernels/qconv_common.h"
#include "backends/cpu/kernels/qgemm_op_support.h"
#include "backends/cpu/qgemm/qconv_nhwc.h"
#include "ir/node_attrs.h"

namespace kiln::cpu {
namespace {

struct QConvNhwcKernel {
  QConv c;
  PackedQMatrix w;
  int64_t taps = 0;
};

// W [out][in][kh][kw] (u8 stored -128, as the GEMM stores it) as [out][tap][in] s8.
std::vector<int8_t> tapMajorWeights(const Tensor& w, int64_t taps) {
  const int64_t out = w.dim(0), in = w.dim(1);
  const uint8_t flip = w.dtype() == DataType::kUint8 ? 0x80 : 0;
  const uint8_t* src = static_cast<const uint8_t*>(w.raw());
  std::vector<int8_t> dst(static_cast<size_t>(w.numel()));
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i)
      for (int64_t t = 0; t < taps; ++t)
        dst[static_cast<size_t>((o * taps + t) * in + i)] =
            static_cast<int8_t>(src[(o * in + i) * taps + t] ^ flip);
  return dst;
}

uint64_t workspaceBytes(const QConvNhwcKernel& k, int threads) {
  return alignTo64(qconvNhwcWorkspaceBytes(k.taps, k.c.groupChannels, threads)) +
         qconvParamBytes(k.c) + alignTo64(static_cast<uint64_t>(k.c.outChannels) * 4);
}

void runQConvNhwc(const QConvNhwcKernel& k, KernelContext& ctx) {
  const QConv& c = k.c;
  const int threads = poolThreads();
  uint8_t* ws = static_cast<uint8_t*>(ctx.workspace(workspaceBytes(k, threads)));
  uint8_t* params = ws + alignTo64(qconvNhwcWorkspaceBytes(k.taps, c.groupChannels, threads));
  auto* channelAdd = reinterpret_cast<int32_t*>(params + qconvParamBytes(c));
  QConvCall call;
  if (!startQConvCall(ctx, c, 0, params, call)) return;
  fillChannelTerms(call, k.w.sums(), c.outChannels, channelAdd);
  const ir::ConvGeometry& g = call.g;
  QConvNhwcProblem p;
  p.ih = call.imageShape[0], p.iw = call.imageShape[1], p.channels = c.groupChannels;
  p.oh = g.output[0], p.ow = g.output[1], p.kh = g.kernel[0], p.kw = g.kernel[1];
  p.sh = g.strides[0], p.sw = g.strides[1], p.dh = g.dilations[0], p.dw = g.dilations[1];
  p.padTop = g.padsBegin[0], p.padLeft = g.padsBegin[1];
  p.xZero = static_cast<uint8_t>(call.xZero);
  p.weights = &k.w;
  p.channelAdd = channelAdd;
  p.output = call.out;
  const uint8_t* x = static_cast<const uint8_t*>(call.x->raw());
  uint8_t* y = static_cast<uint8_t*>(call.y->raw());
  const int64_t imageBytes = call.imageSize * c.groupChannels;
  const int64_t outBytes = call.outSize * c.outChannels * static_cast<int64_t>(call.outElement);
  for (int64_t n = 0; n < call.batch; ++n) {
    p.x = x + n * imageBytes;
    p.y = y + n * outBytes;
    qconvNhwc(p, ws);
  }
}

Kernel makeQConvNhwc(const KernelCreateInfo& info, const QProductSignature& s,
                     const KernelState* saved) {
  auto k = std::make_shared<QConvNhwcKernel>();
  k->c = qconvOf(info, s);
  const QConv& c = k->c;
  k->taps = c.kernelSize;
  const int64_t depth = qconvNhwcDepth(k->taps, c.groupChannels);
  if (saved) {
    k->w = savedQWeights(info.node, *saved, 0, QSide::kRight, CpuIsa::kAvx512Vnni, c.outChannels,
                         depth);
  } else {
    const std::vector<int8_t> w = tapMajorWeights(*constantInput(info, s.b), k->taps);
    k->w = packQWeights(QSide::kRight, CpuIsa::kAvx512Vnni, c.outChannels, depth,
                        {w.data(), depth, 1, true});
  }
  info.keepsOwnCopyOf(static_cast<size_t>(s.b));
  Kernel kernel;
  kernel.run = [k](KernelContext& ctx) { runQConvNhwc(*k, ctx); };
  kernel.workspace = [k](const std::vector<const Shape*>&, int threads) -> uint64_t {
    return workspaceBytes(*k, threads);
  };
  kernel.save = [k] {
    KernelState state;
    state.params = k->w.params();
    state.blobs.push_back(blobOf(k->w));
    state.owner = k;
    return state;
  };
  return kernel;
}

// The weights' zero point as stored (u8 weights -128): "" when it is a constant 0 everywhere.
std::string weightZeroDeclines(const KernelCreateInfo& info, const QProductSignature& s,
                               DataType wType) {
  if (s.bZero == kNoInput) return "";
  const Tensor* z = constantInput(info, s.bZero);
  if (!z) return "the weights' zero point is not a constant";
  const int32_t shift = wType == DataType::kUint8 ? -128 : 0;
  for (int64_t i = 0; i < z->numel(); ++i) {
    if (zeroPointAt(*z, i) + shift != 0)
      return "the weights are asymmetric (zero point " + std::to_string(zeroPointAt(*z, i)) + ")";
  }
  return "";
}

}  // namespace

std::string qconvNhwcDeclines(const KernelCreateInfo& info, const QProductSignature& s) {
  if (ir::attrInt(info.node, "channels_last", 0) != 1) return "X is not channels-last";
  if (!qconvNhwcAvailable()) return "this CPU has no AVX512-VNNI";
  std::string reason = qproductDeclines(info, s, 4);
  if (!reason.empty()) return reason;
  if (inputType(info, s.a)->dtype != DataType::kUint8) return "the activations are not uint8";
  const Tensor& w = *constantInput(info, s.b);
  if (ir::attrInt(info.node, "group", 1) != 1) return "a grouped convolution";
  if (w.dim(1) % 4 != 0)
    return "the input channels (" + std::to_string(w.dim(1)) + ") are not a multiple of 4";
  return weightZeroDeclines(info, s, w.dtype());
}

KernelCandidate qconvNhwcCandidate(const std::string& prefix, QSignatureFn signature) {
  KernelCandidate cand;
  cand.id = qkernelId(prefix + "_nhwc", CpuIsa::kAvx512Vnni);
  cand.isa = CpuIsa::kAvx512Vnni;
  cand.supports = [signature](const KernelCreateInfo& info) {
    return qconvNhwcDeclines(info, signature(info.node));
  };
  cand.create = [signature](const KernelCreateInfo& info) {
    return makeQConvNhwc(info, signature(info.node), nullptr);
  };
  cand.restore = [signature](const KernelCreateInfo& info, const KernelState& state) {
    return makeQConvNhwc(info, signature(info.node), &state);
  };
  return cand;
}

}  // namespace kiln::cpu
