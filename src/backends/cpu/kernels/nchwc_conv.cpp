// The kiln::NchwcConv kernel: checks the tensors against the contract in ir/ops/nchwc.h, packs the
// constant W once when the kernel is made (nchwc_conv.h), and runs the AVX-512 or AVX2 direct
// convolution (nchwc_conv_avx512.cpp, nchwc_conv_avx2.cpp; a plain NCHW X on AVX-512:
// nchwc_conv_plain_avx512.cpp).
#include "backends/cpu/kernels/nchwc_conv.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/nchwc_conv_plain.h"
#include "backends/cpu/kernels/nchwc_conv_scale.h"
#include "backends/cpu/kernels/nchwc_winograd.h"
#include "backends/cpu/thread_pool.h"
#include "core/aligned_memory.h"
#include "ir/ops/conv_geometry.h"
#include "ir/ops/nchwc.h"
#include "ir/sym_shape.h"

namespace kiln::cpu {

using ir::kNchwcBlock;

int64_t nchwcOutBlockGroups(int64_t outBlocks) { return (outBlocks + kNchwcOutBlocks - 1) / kNchwcOutBlocks; }

NchwcBlockRange nchwcOutBlockGroup(int64_t outBlocks, int64_t g) {
  const int64_t groups = nchwcOutBlockGroups(outBlocks);
  return NchwcBlockRange{g * outBlocks / groups, (g + 1) * outBlocks / groups};
}

NchwcPackedWeights packNchwcWeights(const float* w, int64_t outChannels, int64_t inChannels, int64_t kernelH,
                                    int64_t kernelW, NchwcWeightLayout layout) {
  const int64_t taps = kernelH * kernelW, outBlocks = ir::nchwcBlocks(outChannels);
  const int64_t ciStride = layout == NchwcWeightLayout::kDepthwise    ? 1
                           : layout == NchwcWeightLayout::kPlainInput ? inChannels
                                                                      : ir::nchwcBlocks(inChannels) * kNchwcBlock;
  NchwcPackedWeights packed;
  packed.floats = outBlocks * kNchwcBlock * taps * ciStride;
  packed.data = allocateSharedFloats(packed.floats);
  float* out = packed.data.get();
  if (layout == NchwcWeightLayout::kDepthwise) {  // [block][tap][16]
    for (int64_t c = 0; c < outChannels; ++c) {
      for (int64_t t = 0; t < taps; ++t) out[((c / kNchwcBlock) * taps + t) * kNchwcBlock + c % kNchwcBlock] = w[c * taps + t];
    }
    return packed;
  }
  // Each group [ci / 16][tap][ci % 16][M][16] (blocked X) or [tap][ci][M][16] (plain X).
  for (int64_t g = 0; g < nchwcOutBlockGroups(outBlocks); ++g) {
    const NchwcBlockRange r = nchwcOutBlockGroup(outBlocks, g);
    const int64_t m = r.end - r.begin;
    float* group = out + r.begin * taps * ciStride * kNchwcBlock;
    for (int64_t co = r.begin * kNchwcBlock; co < std::min(outChannels, r.end * kNchwcBlock); ++co) {
      const int64_t lane = co - r.begin * kNchwcBlock;  // block (lane / 16) of the group, channel lane % 16
      for (int64_t ci = 0; ci < inChannels; ++ci) {
        for (int64_t t = 0; t < taps; ++t) {
          const int64_t at = layout == NchwcWeightLayout::kPlainInput
                                 ? (t * ciStride + ci) * m * kNchwcBlock
                                 : nchwcBlockedWeightOffset(taps, t, ci / kNchwcBlock * kNchwcBlock, m) +
                                       ci % kNchwcBlock * m * kNchwcBlock;
          group[at + lane] = w[(co * inChannels + ci) * taps + t];
        }
      }
    }
  }
  return packed;
}

namespace {

// Columns [0, n) of one padded row (dst) from the `channels` planes of a plain row (src, the
// planes inPlane apart), interleaved. RGB images get a loop with constant strides.
template <int64_t Channels>
void interleaveRow(const float* src, int64_t inPlane, int64_t n, float* dst) {
  for (int64_t col = 0; col < n; ++col) {
    for (int64_t c = 0; c < Channels; ++c) dst[col * Channels + c] = src[c * inPlane + col];
  }
}
void interleaveRow(const float* src, int64_t inPlane, int64_t n, float* dst, int64_t channels) {
  if (channels == 3) return interleaveRow<3>(src, inPlane, n, dst);
  if (channels == 1) return interleaveRow<1>(src, inPlane, n, dst);
  for (int64_t col = 0; col < n; ++col) {
    for (int64_t c = 0; c < channels; ++c) dst[col * channels + c] = src[c * inPlane + col];
  }
}

// The plain (NCHW) input copied into [N, Hp, Wp, Ci] with its zero padding, exactly the rows
// and columns the convolution reads: the kernels need no bounds checks on it, and one kernel
// row's (kx, ci) values are contiguous, like its packed weights. The image has few channels, so
// the copy is cheap next to the convolution. It goes to `out`, a buffer of the calling thread
// reused from call to call (a fresh one would be page-faulted in on every run); every value of
// it is written, padding included.
void padPlainInput(const NchwcConvShape& s, const float* x, NchwcConvShape& padded, std::vector<float>& out) {
  padded = s;
  padded.height = (s.outHeight - 1) * s.strideH + (s.kernelH - 1) * s.dilationH + 1;
  padded.width = (s.outWidth - 1) * s.strideW + (s.kernelW - 1) * s.dilationW + 1;
  padded.padTop = padded.padLeft = 0;
  const int64_t channels = s.inChannels, inPlane = s.height * s.width;
  const int64_t rowFloats = padded.width * channels;
  const size_t floats = static_cast<size_t>(s.batch * padded.height * rowFloats);
  if (out.size() < floats) out.resize(floats);
  float* data = out.data();
  const int64_t begin = std::clamp<int64_t>(s.padLeft, 0, padded.width);
  const int64_t end = std::clamp<int64_t>(s.padLeft + s.width, begin, padded.width);
  parallelForAtLeast(s.batch * padded.height, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t image = r / padded.height, iy = r % padded.height - s.padTop;
      float* dst = data + r * rowFloats;
      if (iy < 0 || iy >= s.height) {
        std::fill(dst, dst + rowFloats, 0.0f);
        continue;
      }
      std::fill(dst, dst + begin * channels, 0.0f);
      std::fill(dst + end * channels, dst + rowFloats, 0.0f);
      // dst column col reads source column col - padLeft.
      interleaveRow(x + image * channels * inPlane + iy * s.width + (begin - s.padLeft), inPlane, end - begin,
                    dst + begin * channels, channels);
    }
  });
}

}  // namespace

void nchwcConv(const NchwcConvArgs& args) {
  // AVX-512 reads a plain X in place (nchwc_conv_plain_avx512.cpp); AVX2 reads a padded copy.
  if (args.shape->plainInput && activeCpuIsa() >= CpuIsa::kAvx512) return detail::nchwcPlainConvAvx512(args);
  NchwcConvArgs a = args;
  NchwcConvShape padded;
  if (args.shape->plainInput) {
    // One buffer per calling thread: kernels of concurrent runs use different threads, and a
    // thread runs one kernel at a time.
    thread_local std::vector<float> paddedInput;
    padPlainInput(*args.shape, args.x, padded, paddedInput);
    a.shape = &padded;
    a.x = paddedInput.data();
  }
  if (activeCpuIsa() >= CpuIsa::kAvx512) return detail::nchwcConvAvx512(a);
  detail::nchwcConvAvx2(a);
}

namespace {

// What the kernel keeps from the node: W's shape, its packed values and the fused epilogue.
struct PreparedNchwcConv {
  int64_t outChannels = 0, inPerGroup = 0, kernelH = 0, kernelW = 0, group = 1;
  NchwcPackedWeights blockedWeights, plainWeights;  // for a blocked / plain X (depthwise: blocked only)
  NchwcWinogradWeights winograd;  // packed instead of blockedWeights where Winograd runs (nchwc_winograd.h)
  Activation act;
  // outBlocks * 16 floats of bias (zero past Co) when B is a constant or absent; empty when B is
  // computed at run time (then copied on every run).
  std::vector<float> bias;
  // The geometry for X's spatial size when it was static at creation (height -1 otherwise), so
  // that runs at that size do not re-read the attributes.
  int64_t staticHeight = -1, staticWidth = -1;
  ir::ConvGeometry staticGeometry;
};

// B [Co] as outBlocks * 16 floats, zero past Co; fails through `fail` when B is not [Co] float32.
template <typename Fail>
std::vector<float> paddedBias(const Tensor* b, int64_t outChannels, Fail&& fail) {
  std::vector<float> bias(static_cast<size_t>(ir::nchwcBlocks(outChannels) * kNchwcBlock), 0.0f);
  if (!b) return bias;
  if (b->dtype() != DataType::kFloat32 || b->numel() != outChannels) {
    fail("B " + b->describe() + " must be float32 with one value per output channel (" + std::to_string(outChannels) +
         ")");
  }
  std::copy(b->data<float>(), b->data<float>() + outChannels, bias.begin());
  return bias;
}

PreparedNchwcConv prepare(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  const Tensor* w = info.constants.size() > 1 ? info.constants[1] : nullptr;
  if (!w) ir::failNode(node, "NchwcConv needs W as a constant (an initializer); it is computed at run time here",
                       ErrorCode::kUnsupportedNode);
  if (w->dtype() != DataType::kFloat32 || w->rank() != 4) {
    ir::failNode(node, "NchwcConv W must be float32 [Co, Ci / group, kH, kW], got " + w->describe());
  }
  PreparedNchwcConv p;
  p.outChannels = w->dim(0);
  p.inPerGroup = w->dim(1);
  p.kernelH = w->dim(2);
  p.kernelW = w->dim(3);
  p.group = ir::attrInt(node, "group", 1);
  if (p.group != 1 && (p.inPerGroup != 1 || p.outChannels != p.group)) {
    ir::failNode(node, "a grouped NchwcConv must be depthwise (W [group, 1, kH, kW]), got W " + w->describe() +
                           " with group " + std::to_string(p.group));
  }
  p.act = fusedActivationOf(node);
  const bool depthwise = p.group != 1;
  // X's rank says which layout to pack for; both when it is not known yet.
  const ir::TypeInfo* xType = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  const int64_t xRank = xType && xType->shape ? static_cast<int64_t>(xType->shape->size()) : -1;
  const float* values = w->data<float>();
  if (depthwise) {
    p.blockedWeights = packNchwcWeights(values, p.outChannels, 1, p.kernelH, p.kernelW, NchwcWeightLayout::kDepthwise);
  } else {
    // An X scale (input 4) rescales the direct packing per image; Winograd's is not kept for it.
    const bool scaledX = node.inputs.size() > 4 && node.inputs[4] != ir::kNoValue;
    if (!scaledX) p.winograd = prepareNchwcWinograd(node, xType, *w);
    if (xRank != 4 && !p.winograd.data) {
      p.blockedWeights = packNchwcWeights(values, p.outChannels, p.inPerGroup, p.kernelH, p.kernelW,
                                          NchwcWeightLayout::kBlockedInput);
    }
    if (xRank != 5) {
      p.plainWeights = packNchwcWeights(values, p.outChannels, p.inPerGroup, p.kernelH, p.kernelW,
                                        NchwcWeightLayout::kPlainInput);
    }
  }
  const Tensor* b = info.constants.size() > 2 ? info.constants[2] : nullptr;
  const bool hasBias = b || (info.inputTypes.size() > 2 && info.inputTypes[2]);
  if (!hasBias || b) {
    p.bias = paddedBias(hasBias ? b : nullptr, p.outChannels,
                        [&](const std::string& message) { ir::failNode(node, message, ErrorCode::kInvalidArgument); });
  }
  const std::optional<Shape> xShape = xType && xType->shape ? ir::concreteShape(*xType->shape) : std::nullopt;
  if (xShape && xShape->size() >= 4) {
    p.staticHeight = (*xShape)[2];
    p.staticWidth = (*xShape)[3];
    p.staticGeometry = ir::convGeometry(node, {p.staticHeight, p.staticWidth}, {p.kernelH, p.kernelW});
  }
  info.keepsOwnCopyOf(1);
  return p;
}

void runNchwcConv(KernelContext& ctx, const PreparedNchwcConv& p) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DataType::kFloat32) ctx.fail("X must be float32, got " + x.describe(), ErrorCode::kInvalidArgument);
  const bool depthwise = p.group != 1;
  const int64_t inChannels = depthwise ? p.group : p.inPerGroup;
  NchwcConvShape s;
  if (x.rank() == 4) {
    if (depthwise) ctx.fail("a depthwise NchwcConv needs a blocked X, got " + x.describe(), ErrorCode::kInvalidArgument);
    if (x.dim(1) != inChannels) {
      ctx.fail("X " + x.describe() + " has " + std::to_string(x.dim(1)) + " channels but W expects " +
                   std::to_string(inChannels), ErrorCode::kInvalidArgument);
    }
    s.plainInput = true;
  } else if (x.rank() == 5) {
    if (x.dim(4) != kNchwcBlock || x.dim(1) != ir::nchwcBlocks(inChannels)) {
      ctx.fail("X " + x.describe() + " must be blocked [N, " + std::to_string(ir::nchwcBlocks(inChannels)) +
                   ", H, W, 16] for the " + std::to_string(inChannels) + " input channels of W",
               ErrorCode::kInvalidArgument);
    }
  } else {
    ctx.fail("X must be blocked [N, C/16, H, W, 16] or NCHW [N, C, H, W], got " + x.describe(),
             ErrorCode::kInvalidArgument);
  }
  s.batch = x.dim(0);
  s.inChannels = inChannels;
  s.outChannels = p.outChannels;
  s.height = x.dim(2);
  s.width = x.dim(3);
  s.kernelH = p.kernelH;
  s.kernelW = p.kernelW;
  s.depthwise = depthwise;
  ir::ConvGeometry computed;
  const bool staticSize = s.height == p.staticHeight && s.width == p.staticWidth;
  if (!staticSize) computed = ir::convGeometry(ctx.node(), {s.height, s.width}, {p.kernelH, p.kernelW});
  const ir::ConvGeometry& g = staticSize ? p.staticGeometry : computed;
  s.outHeight = g.output[0];
  s.outWidth = g.output[1];
  s.strideH = g.strides[0];
  s.strideW = g.strides[1];
  s.dilationH = g.dilations[0];
  s.dilationW = g.dilations[1];
  s.padTop = g.padsBegin[0];
  s.padLeft = g.padsBegin[1];
  if (s.outHeight <= 0 || s.outWidth <= 0) {
    ctx.fail("the kernel " + std::to_string(p.kernelH) + "x" + std::to_string(p.kernelW) +
                 " does not fit the padded input " + x.describe(), ErrorCode::kInvalidArgument);
  }

  const Shape yShape{s.batch, s.outBlocks(), s.outHeight, s.outWidth, kNchwcBlock};
  std::vector<float> runBias;  // B computed at run time
  if (p.bias.empty()) {
    runBias = paddedBias(ctx.hasInput(2) ? &ctx.input(2) : nullptr, p.outChannels,
                         [&](const std::string& message) { ctx.fail(message, ErrorCode::kInvalidArgument); });
  }
  const Tensor* residual = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
  if (residual && (residual->dtype() != DataType::kFloat32 || residual->shape() != yShape)) {
    ctx.fail("residual Z " + residual->describe() + " must be float32 shaped like the output " + shapeToString(yShape),
             ErrorCode::kInvalidArgument);
  }
  Tensor& y = ctx.output(0);
  if (y.shape() != yShape) {
    ctx.fail("output " + y.describe() + " does not have the convolution's shape " + shapeToString(yShape));
  }
  if (y.numel() == 0) return;
  NchwcConvArgs args;
  args.shape = &s;
  args.x = x.data<float>();
  args.weights = (s.plainInput ? p.plainWeights : p.blockedWeights).data.get();
  const bool winograd = p.winograd.data && !s.plainInput;
  if (!args.weights && !winograd) {
    ctx.fail("X " + x.describe() + " does not have the rank X had when the kernel was made");
  }
  args.bias = p.bias.empty() ? runBias.data() : p.bias.data();
  args.residual = residual ? residual->data<float>() : nullptr;
  args.act = p.act;
  args.y = y.data<float>();
  if (ctx.hasInput(4)) return runNchwcConvWithInputScale(ctx, args, ctx.input(4));
  if (winograd) return nchwcWinogradConv(args, p.winograd);
  nchwcConv(args);
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("kiln", "NchwcConv", KernelFactory([](const KernelCreateInfo& info) -> KernelFn {
  const PreparedNchwcConv prepared = prepare(info);
  return [prepared](KernelContext& ctx) { runNchwcConv(ctx, prepared); };
}));

}  // namespace kiln::cpu
