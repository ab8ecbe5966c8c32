// The channels-last depthwise candidate `<prefix>_depthwise_nhwc_avx512vnni` of the integer
// convolutions: kiln::QConv / QLinearConv nodes with channels_last = 1, one input and one output
// channel per group, kernels up to four wide, uint8 X and an 8-bit output, run by the quad kernel
// (backends/cpu/qgemm/qconv_depthwise_nhwc.h). W minus its zero points is packed when the kernel is
// made (a few bytes a channel, so plans do not keep it); the depthwise AVX-512 candidate after it
// takes what it declines.
#include <algorithm>
#include <memory>

#include "backends/cpu/kernels/qconv_common.h"
#include "backends/cpu/kernels/qgemm_op_support.h"
#include "backends/cpu/qgemm/qconv_depthwise_nhwc.h"
#include "ir/node_attrs.h"

namespace kiln::cpu {
namespace {

struct DepthwiseNhwcWeights {
  std::vector<int8_t> values;  // [channel][ky][kx]: w - zW
  std::vector<int32_t> sums;   // per channel
};

// W minus its zero point (constant, one or one per channel), or why it does not fit int8.
std::string shiftedWeights(const KernelCreateInfo& info, const QProductSignature& s,
                           DepthwiseNhwcWeights* out) {
  const Tensor& w = *constantInput(info, s.b);
  const Tensor* z = s.bZero == kNoInput ? nullptr : constantInput(info, s.bZero);
  if (s.bZero != kNoInput && !z) return "the weights' zero point is not a constant";
  const int64_t channels = w.dim(0), taps = w.numel() / std::max<int64_t>(1, channels);
  if (z && z->numel() != 1 && z->numel() != channels)
    return "the weights' zero point has " + std::to_string(z->numel()) + " values";
  DepthwiseNhwcWeights shifted;
  shifted.values.resize(static_cast<size_t>(w.numel()));
  shifted.sums.assign(static_cast<size_t>(channels), 0);
  for (int64_t c = 0; c < channels; ++c) {
    const int32_t zero = z ? zeroPointAt(*z, z->numel() == 1 ? 0 : c) : 0;
    for (int64_t t = 0; t < taps; ++t) {
      const int64_t i = c * taps + t;
      const int32_t v =
          (w.dtype() == DataType::kInt8 ? w.data<int8_t>()[i] : w.data<uint8_t>()[i]) - zero;
      if (v < -128 || v > 127)
        return "a weight minus its zero point (" + std::to_string(v) + ") does not fit int8";
      shifted.values[static_cast<size_t>(i)] = static_cast<int8_t>(v);
      shifted.sums[static_cast<size_t>(c)] += v;
    }
  }
  if (out) *out = std::move(shifted);
  return "";
}

std::string depthwiseNhwcDeclines(const KernelCreateInfo& info, const QProductSignature& s) {
  if (ir::attrInt(info.node, "channels_last", 0) != 1) return "X is not channels-last";
  if (!qconvDepthwiseNhwcAvailable()) return "this CPU has no AVX512-VNNI";
  std::string reason = qproductDeclines(info, s, 4);
  if (!reason.empty()) return reason;
  if (inputType(info, s.a)->dtype != DataType::kUint8) return "the activations are not uint8";
  if (s.yScale == kNoInput) return "the output is not 8-bit";
  const QConv c = qconvOf(info, s);
  if (c.groupOut != 1 || c.groupChannels != 1)
    return "not one input and one output channel per group";
  if (c.wShape[3] > kDepthwiseNhwcMaxWidth)
    return "the kernel is " + std::to_string(c.wShape[3]) + " wide, more than " +
           std::to_string(kDepthwiseNhwcMaxWidth);
  return shiftedWeights(info, s, nullptr);
}

struct DepthwiseNhwcKernel {
  QConv c;
  std::vector<int8_t> packed;
  std::vector<int32_t> sums;
};

// The problem's geometry for X's shape (no tensors).
QConvDepthwiseNhwcProblem geometryOf(const QConv& c, const ir::ConvGeometry& g,
                                     const Shape& image) {
  QConvDepthwiseNhwcProblem p;
  p.ih = image[0], p.iw = image[1], p.channels = c.outChannels;
  p.oh = g.output[0], p.ow = g.output[1], p.kh = g.kernel[0], p.kw = g.kernel[1];
  p.sh = g.strides[0], p.sw = g.strides[1], p.dh = g.dilations[0], p.dw = g.dilations[1];
  p.padTop = g.padsBegin[0], p.padLeft = g.padsBegin[1];
  return p;
}

uint64_t workspaceBytes(const QConv& c, const QConvDepthwiseNhwcProblem& p, int threads) {
  return alignTo64(qconvDepthwiseNhwcWorkspaceBytes(p, threads)) + qconvParamBytes(c) +
         alignTo64(static_cast<uint64_t>(c.outChannels) * 4);
}

void runDepthwiseNhwc(const DepthwiseNhwcKernel& k, KernelContext& ctx) {
  const QConv& c = k.c;
  const int threads = poolThreads();
  const Shape& xs = ctx.input(static_cast<size_t>(c.s.a)).shape();
  const ir::ConvGeometry geometry = qconvGeometry(&ctx, c, xs);
  QConvDepthwiseNhwcProblem p = geometryOf(c, geometry, Shape{xs[1], xs[2]});
  const uint64_t scratch = alignTo64(qconvDepthwiseNhwcWorkspaceBytes(p, threads));
  uint8_t* ws = static_cast<uint8_t*>(ctx.workspace(workspaceBytes(c, p, threads)));
  auto* channelAdd = reinterpret_cast<int32_t*>(ws + scratch + qconvParamBytes(c));
  QConvCall call;
  if (!startQConvCall(ctx, c, 0, ws + scratch, call)) return;
  fillChannelTerms(call, k.sums.data(), c.outChannels, channelAdd);
  p.xZero = static_cast<uint8_t>(call.xZero);
  p.weights = k.packed.data();
  p.channelAdd = channelAdd;
  p.output = call.out;
  const uint8_t* x = static_cast<const uint8_t*>(call.x->raw());
  uint8_t* y = static_cast<uint8_t*>(call.y->raw());
  for (int64_t n = 0; n < call.batch; ++n) {
    p.x = x + n * call.imageSize * c.outChannels;
    p.y = y + n * call.outSize * c.outChannels;
    qconvDepthwiseNhwc(p, ws);
  }
}

Kernel makeDepthwiseNhwc(const KernelCreateInfo& info, const QProductSignature& s) {
  auto k = std::make_shared<DepthwiseNhwcKernel>();
  k->c = qconvOf(info, s);
  DepthwiseNhwcWeights w;
  shiftedWeights(info, s, &w);
  k->packed =
      packDepthwiseNhwcWeights(w.values.data(), k->c.outChannels, k->c.wShape[2], k->c.wShape[3]);
  k->sums = std::move(w.sums);
  Kernel kernel;
  kernel.run = [k](KernelContext& ctx) { runDepthwiseNhwc(*k, ctx); };
  kernel.workspace = [k](const std::vector<const Shape*>& shapes, int threads) -> uint64_t {
    const Shape* x = qconvInputShape(k->c, shapes);
    if (!x) return 0;
    const ir::ConvGeometry g = qconvGeometry(nullptr, k->c, *x);
    return workspaceBytes(k->c, geometryOf(k->c, g, Shape{(*x)[1], (*x)[2]}), threads);
  };
  return kernel;
}

}  // namespace

KernelCandidate qconvDepthwiseNhwcCandidate(const std::string& prefix, QSignatureFn signature) {
  KernelCandidate cand;
  cand.id = qkernelId(prefix + "_depthwise_nhwc", CpuIsa::kAvx512Vnni);
  cand.isa = CpuIsa::kAvx512Vnni;
  cand.supports = [signature](const KernelCreateInfo& info) {
    return depthwiseNhwcDeclines(info, signature(info.node));
  };
  cand.create = [signature](const KernelCreateInfo& info) {
    return makeDepthwiseNhwc(info, signature(info.node));
  };
  return cand;
}

}  // namespace kiln::cpu
