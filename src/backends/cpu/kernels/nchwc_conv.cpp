// The kiln::NchwcConv kernel: checks the tensors against the contract in ir/ops/nchwc.h, packs the
// constant W once when the kernel is made (nchwc_conv.h), and runs the AVX-512 or AVX2 direct
// convolution (nchwc_conv_avx512.cpp, nchwc_conv_avx2.cpp; a plain NCHW X on AVX-512:
// nchwc_conv_plain_avx512.cpp; grouped: slice by slice, nchwc_conv_grouped.h), or for layers
// marked bf16 the BF16 ones (direct, blocked or plain X: nchwc_conv_bf16.h; Winograd:
// nchwc_winograd.h).
#include "backends/cpu/kernels/nchwc_conv.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/bf16_candidates.h"
#include "backends/cpu/kernels/nchwc_conv_bf16.h"
#include "backends/cpu/kernels/nchwc_conv_grouped.h"
#include "backends/cpu/kernels/nchwc_conv_plain.h"
#include "backends/cpu/kernels/nchwc_conv_scale.h"
#include "backends/cpu/kernels/nchwc_winograd.h"
#include "backends/cpu/thread_pool.h"
#include "core/aligned_memory.h"
#include "ir/ops/conv_geometry.h"
#include "ir/ops/nchwc.h"
#include "ir/ops/nchwc_groups.h"
#include "ir/sym_shape.h"

namespace kiln::cpu {

using ir::kNchwcBlock;

int64_t nchwcOutBlockGroups(int64_t outBlocks) {
  return (outBlocks + kNchwcOutBlocks - 1) / kNchwcOutBlocks;
}

NchwcBlockRange nchwcOutBlockGroup(int64_t outBlocks, int64_t g) {
  const int64_t groups = nchwcOutBlockGroups(outBlocks);
  return NchwcBlockRange{g * outBlocks / groups, (g + 1) * outBlocks / groups};
}

NchwcPackedWeights packNchwcWeights(const float* w, int64_t outChannels, int64_t inChannels,
                                    int64_t kernelH, int64_t kernelW, NchwcWeightLayout layout) {
  const int64_t taps = kernelH * kernelW, outBlocks = ir::nchwcBlocks(outChannels);
  const int64_t ciStride = layout == NchwcWeightLayout::kDepthwise ? 1
                           : layout == NchwcWeightLayout::kPlainInput
                               ? inChannels
                               : ir::nchwcBlocks(inChannels) * kNchwcBlock;
  NchwcPackedWeights packed;
  packed.floats = outBlocks * kNchwcBlock * taps * ciStride;
  packed.data = allocateSharedFloats(packed.floats);
  float* out = packed.data.get();
  if (layout == NchwcWeightLayout::kDepthwise) {  // [block][tap][16]
    for (int64_t c = 0; c < outChannels; ++c) {
      for (int64_t t = 0; t < taps; ++t)
        out[((c / kNchwcBlock) * taps + t) * kNchwcBlock + c % kNchwcBlock] = w[c * taps + t];
    }
    return packed;
  }
  // Each group [ci / 16][tap][ci % 16][M][16] (blocked X) or [tap][ci][M][16] (plain X).
  for (int64_t g = 0; g < nchwcOutBlockGroups(outBlocks); ++g) {
    const NchwcBlockRange r = nchwcOutBlockGroup(outBlocks, g);
    const int64_t m = r.end - r.begin;
    float* group = out + r.begin * taps * ciStride * kNchwcBlock;
    for (int64_t co = r.begin * kNchwcBlock; co < std::min(outChannels, r.end * kNchwcBlock);
         ++co) {
      const int64_t lane =
          co - r.begin * kNchwcBlock;  // block (lane / 16) of the group, channel lane % 16
      for (int64_t ci = 0; ci < inChannels; ++ci) {
        for (int64_t t = 0; t < taps; ++t) {
          const int64_t at =
              layout == NchwcWeightLayout::kPlainInput
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

// The shape of the padded copy of a plain X: exactly the rows and columns the convolution reads.
NchwcConvShape paddedPlainShape(const NchwcConvShape& s) {
  NchwcConvShape padded = s;
  padded.height = (s.outHeight - 1) * s.strideH + (s.kernelH - 1) * s.dilationH + 1;
  padded.width = (s.outWidth - 1) * s.strideW + (s.kernelW - 1) * s.dilationW + 1;
  padded.padTop = padded.padLeft = 0;
  return padded;
}

// The plain (NCHW) input copied into [N, Hp, Wp, Ci] with its zero padding, exactly the rows
// and columns the convolution reads: the kernels need no bounds checks on it, and one kernel
// row's (kx, ci) values are contiguous, like its packed weights. The image has few channels, so
// the copy is cheap next to the convolution. It goes to `data` (the kernel's workspace, so that
// it is not page-faulted in on every run); every value of it is written, padding included.
void padPlainInput(const NchwcConvShape& s, const float* x, const NchwcConvShape& padded,
                   float* data) {
  const int64_t channels = s.inChannels, inPlane = s.height * s.width;
  const int64_t rowFloats = padded.width * channels;
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
      interleaveRow(x + image * channels * inPlane + iy * s.width + (begin - s.padLeft), inPlane,
                    end - begin, dst + begin * channels, channels);
    }
  });
}

}  // namespace

int64_t nchwcConvScratchFloats(const NchwcConvShape& s, CpuIsa isa) {
  if (!s.plainInput || isa >= CpuIsa::kAvx512) return 0;
  const NchwcConvShape padded = paddedPlainShape(s);
  return s.batch * padded.height * padded.width * s.inChannels;
}

void nchwcConv(const NchwcConvArgs& args, CpuIsa isa) {
  // AVX-512 reads a plain X in place (nchwc_conv_plain_avx512.cpp); AVX2 reads a padded copy.
  if (args.shape->plainInput && isa >= CpuIsa::kAvx512) return detail::nchwcPlainConvAvx512(args);
  NchwcConvArgs a = args;
  const NchwcConvShape padded = paddedPlainShape(*args.shape);
  ScratchFloats own;  // when the caller has no workspace for the copy
  if (args.shape->plainInput) {
    float* copy = args.scratch ? args.scratch : own.get(nchwcConvScratchFloats(*args.shape, isa));
    padPlainInput(*args.shape, args.x, padded, copy);
    a.shape = &padded;
    a.x = copy;
  }
  if (isa >= CpuIsa::kAvx512) return detail::nchwcConvAvx512(a);
  detail::nchwcConvAvx2(a);
}

namespace {

// How a candidate convolves the checked call (its algorithm and ISA, fixed when it is made).
using NchwcAlgorithm = std::function<void(KernelContext&, NchwcConvArgs&)>;

// What the kernel keeps from the node: W's shape, its packed values and the fused epilogue.
struct PreparedNchwcConv {
  ir::Node attrs;  // name, op type and attributes only: the geometry of sizes unknown at build time
  int64_t outChannels = 0, inPerGroup = 0, kernelH = 0, kernelW = 0, group = 1;
  bool depthwise = false;      // group == Ci == Co
  int64_t groupsPerSlice = 1;  // grouped, not depthwise: the model's groups in one block slice
  NchwcPackedWeights blockedWeights,
      plainWeights;  // for a blocked / plain X (depthwise: blocked only)
  NchwcWinogradWeights
      winograd;  // packed instead of blockedWeights where Winograd runs (nchwc_winograd.h)
  Activation act;
  // outBlocks * 16 floats of bias (zero past Co) when B is a constant or absent; empty when B is
  // computed at run time (then copied on every run).
  std::vector<float> bias;
  // The geometry for X's spatial size when it was static at creation (height -1 otherwise), so
  // that runs at that size do not re-read the attributes.
  int64_t staticHeight = -1, staticWidth = -1;
  ir::ConvGeometry staticGeometry;
  NchwcAlgorithm convolve;
};

// B [Co] as outBlocks * 16 floats, zero past Co; fails through `fail` when B is not [Co] float32.
template <typename Fail>
std::vector<float> paddedBias(const Tensor* b, int64_t outChannels, Fail&& fail) {
  std::vector<float> bias(static_cast<size_t>(ir::nchwcBlocks(outChannels) * kNchwcBlock), 0.0f);
  if (!b) return bias;
  if (b->dtype() != DataType::kFloat32 || b->numel() != outChannels) {
    fail("B " + b->describe() + " must be float32 with one value per output channel (" +
         std::to_string(outChannels) + ")");
  }
  std::copy(b->data<float>(), b->data<float>() + outChannels, bias.begin());
  return bias;
}

const Tensor& constantWeights(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  const Tensor* w = info.constants.size() > 1 ? info.constants[1] : nullptr;
  if (!w)
    ir::failNode(
        node, "NchwcConv needs W as a constant (an initializer); it is computed at run time here",
        ErrorCode::kUnsupportedNode);
  if (w->dtype() != DataType::kFloat32 || w->rank() != 4) {
    ir::failNode(node,
                 "NchwcConv W must be float32 [Co, Ci / group, kH, kW], got " + w->describe());
  }
  return *w;
}

// X's rank at build time, -1 when unknown.
int64_t xRankOf(const KernelCreateInfo& info) {
  const ir::TypeInfo* x = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  return x && x->shape ? static_cast<int64_t>(x->shape->size()) : -1;
}

bool hasInputScale(const KernelCreateInfo& info) {
  return info.node.inputs.size() > 4 && info.node.inputs[4] != ir::kNoValue;
}

// Attributes, bias and static geometry; the weights are packed by each candidate for its layout.
PreparedNchwcConv prepareCommon(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  const Tensor& w = constantWeights(info);
  PreparedNchwcConv p;
  p.attrs.name = node.name;
  p.attrs.opType = node.opType;
  p.attrs.domain = node.domain;
  p.attrs.opset = node.opset;
  p.attrs.attrs = node.attrs;
  p.outChannels = w.dim(0);
  p.inPerGroup = w.dim(1);
  p.kernelH = w.dim(2);
  p.kernelW = w.dim(3);
  p.group = ir::attrInt(node, "group", 1);
  p.depthwise = p.group != 1 && p.inPerGroup == 1 && p.outChannels == p.group;
  if (p.group != 1 && !p.depthwise) {
    const ir::NchwcGroupSlices slices =
        ir::nchwcGroupSlices(p.inPerGroup * p.group, p.outChannels, p.group);
    if (slices.slices == 0) {
      ir::failNode(node, "W " + w.describe() + " with group " + std::to_string(p.group) +
                             " is neither depthwise nor blockable: " + slices.whyNot);
    }
    p.groupsPerSlice = slices.groupsPerSlice;
  }
  p.act = fusedActivationOf(node);
  const Tensor* b = info.constants.size() > 2 ? info.constants[2] : nullptr;
  const bool hasBias = b || (info.inputTypes.size() > 2 && info.inputTypes[2]);
  if (!hasBias || b) {
    p.bias = paddedBias(hasBias ? b : nullptr, p.outChannels, [&](const std::string& message) {
      ir::failNode(node, message, ErrorCode::kInvalidArgument);
    });
  }
  const ir::TypeInfo* xType = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  const std::optional<Shape> xShape =
      xType && xType->shape ? ir::concreteShape(*xType->shape) : std::nullopt;
  if (xShape && xShape->size() >= 4) {
    p.staticHeight = (*xShape)[2];
    p.staticWidth = (*xShape)[3];
    p.staticGeometry =
        ir::convGeometry(node, {p.staticHeight, p.staticWidth}, {p.kernelH, p.kernelW});
  }
  info.keepsOwnCopyOf(1);
  return p;
}

// The call's sizes from X and the kept geometry (computed again only for another spatial size).
// The kernel size and output geometry over s.height x s.width: worked out at creation for the
// static spatial size, else now.
void setConvGeometry(NchwcConvShape& s, const PreparedNchwcConv& p) {
  s.kernelH = p.kernelH;
  s.kernelW = p.kernelW;
  ir::ConvGeometry computed;
  const bool staticSize = s.height == p.staticHeight && s.width == p.staticWidth;
  if (!staticSize)
    computed = ir::convGeometry(p.attrs, {s.height, s.width}, {p.kernelH, p.kernelW});
  const ir::ConvGeometry& g = staticSize ? p.staticGeometry : computed;
  s.outHeight = g.output[0];
  s.outWidth = g.output[1];
  s.strideH = g.strides[0];
  s.strideW = g.strides[1];
  s.dilationH = g.dilations[0];
  s.dilationW = g.dilations[1];
  s.padTop = g.padsBegin[0];
  s.padLeft = g.padsBegin[1];
}

// The call shape for a plain NCHW X of shape `x`, or nullopt when x is not rank 4 or the output
// is empty (workspace functions, which see shapes only).
std::optional<NchwcConvShape> plainShapeOf(const PreparedNchwcConv& p, const Shape* x) {
  if (!x || x->size() != 4) return std::nullopt;
  NchwcConvShape s;
  s.plainInput = true;
  s.batch = (*x)[0];
  s.inChannels = p.inPerGroup;
  s.height = (*x)[2];
  s.width = (*x)[3];
  setConvGeometry(s, p);
  if (s.outHeight <= 0 || s.outWidth <= 0) return std::nullopt;
  return s;
}

NchwcConvShape callShape(KernelContext& ctx, const PreparedNchwcConv& p, const Tensor& x) {
  if (x.dtype() != DataType::kFloat32)
    ctx.fail("X must be float32, got " + x.describe(), ErrorCode::kInvalidArgument);
  const int64_t inChannels = p.depthwise ? p.group : p.inPerGroup * p.group;
  NchwcConvShape s;
  if (x.rank() == 4) {
    if (p.group != 1) {
      ctx.fail("a grouped NchwcConv needs a blocked X, got " + x.describe(),
               ErrorCode::kInvalidArgument);
    }
    if (x.dim(1) != inChannels) {
      ctx.fail("X " + x.describe() + " has " + std::to_string(x.dim(1)) +
                   " channels but W expects " + std::to_string(inChannels),
               ErrorCode::kInvalidArgument);
    }
    s.plainInput = true;
  } else if (x.rank() == 5) {
    if (x.dim(4) != kNchwcBlock || x.dim(1) != ir::nchwcBlocks(inChannels)) {
      ctx.fail("X " + x.describe() + " must be blocked [N, " +
                   std::to_string(ir::nchwcBlocks(inChannels)) + ", H, W, 16] for the " +
                   std::to_string(inChannels) + " input channels of W",
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
  s.depthwise = p.depthwise;
  if (!p.depthwise) {
    s.groups = p.group;
    s.groupsPerSlice = p.groupsPerSlice;
  }
  setConvGeometry(s, p);
  if (s.outHeight <= 0 || s.outWidth <= 0) {
    ctx.fail("the kernel " + std::to_string(p.kernelH) + "x" + std::to_string(p.kernelW) +
                 " does not fit the padded input " + x.describe(),
             ErrorCode::kInvalidArgument);
  }
  return s;
}

void runNchwcConv(KernelContext& ctx, const PreparedNchwcConv& p) {
  const Tensor& x = ctx.input(0);
  NchwcConvShape s = callShape(ctx, p, x);
  const Shape yShape{s.batch, s.outBlocks(), s.outHeight, s.outWidth, kNchwcBlock};
  std::vector<float> runBias;  // B computed at run time
  if (p.bias.empty()) {
    runBias = paddedBias(
        ctx.hasInput(2) ? &ctx.input(2) : nullptr, p.outChannels,
        [&](const std::string& message) { ctx.fail(message, ErrorCode::kInvalidArgument); });
  }
  const Tensor* residual = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
  if (residual && (residual->dtype() != DataType::kFloat32 || residual->shape() != yShape)) {
    ctx.fail("residual Z " + residual->describe() + " must be float32 shaped like the output " +
                 shapeToString(yShape),
             ErrorCode::kInvalidArgument);
  }
  Tensor& y = ctx.output(0);
  if (y.shape() != yShape) {
    ctx.fail("output " + y.describe() + " does not have the convolution's shape " +
             shapeToString(yShape));
  }
  if (y.numel() == 0) return;
  NchwcConvArgs args;
  args.shape = &s;
  args.x = x.data<float>();
  args.weights = (s.plainInput ? p.plainWeights : p.blockedWeights).data.get();
  if (!args.weights && !p.winograd.data) {
    ctx.fail("X " + x.describe() + " does not have the rank X had when the kernel was made");
  }
  args.bias = p.bias.empty() ? runBias.data() : p.bias.data();
  args.residual = residual ? residual->data<float>() : nullptr;
  args.act = p.act;
  args.y = y.data<float>();
  p.convolve(ctx, args);
}

// The saved blob k as the mutable pointer the packings hold (never written through).
std::shared_ptr<float> savedFloats(const KernelCreateInfo& info, const KernelState& state, size_t k,
                                   int64_t floats) {
  return std::const_pointer_cast<float>(cpu::savedFloats(info.node, state, k, floats));
}

// Floats packNchwcWeights makes for W [Co, Ci / group, kH, kW] in `layout`.
int64_t nchwcPackedFloats(const PreparedNchwcConv& p, NchwcWeightLayout layout) {
  if (p.group != 1 && !p.depthwise) {
    return nchwcGroupedWeightFloats(p.outChannels, p.inPerGroup * p.group, p.group, p.kernelH,
                                    p.kernelW);
  }
  const int64_t ciStride = layout == NchwcWeightLayout::kDepthwise ? 1
                           : layout == NchwcWeightLayout::kPlainInput
                               ? p.inPerGroup
                               : ir::nchwcBlocks(p.inPerGroup) * kNchwcBlock;
  return ir::nchwcBlocks(p.outChannels) * kNchwcBlock * p.kernelH * p.kernelW * ciStride;
}

KernelState savedBlobs(const std::vector<const NchwcPackedWeights*>& packed,
                       std::vector<uint8_t> params) {
  KernelState state;
  state.params = std::move(params);
  for (const NchwcPackedWeights* w : packed) {
    state.blobs.push_back({w->data.get(), static_cast<uint64_t>(w->floats) * sizeof(float)});
    state.owner = w->data;
  }
  return state;
}

// The candidates, in the order they are tried (the one place NchwcConv's algorithm and ISA are
// chosen). Each packs W for its own layout only.
std::string winogradDeclines(const KernelCreateInfo& info) {
  if (hasInputScale(info))
    return "X has a scale (input 4): the direct packing is rescaled per image";
  const Tensor& w = constantWeights(info);
  const ir::TypeInfo* xType = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  if (xRankOf(info) != 5) return "X is not blocked (rank 5)";
  const int64_t group = ir::attrInt(info.node, "group", 1);
  if (group != 1 || w.dim(2) != 3 || w.dim(3) != 3) return "takes 3x3 ungrouped convolutions";
  const auto& x = *xType->shape;
  if (!x[2].isKnown() || !x[3].isKnown()) return "X's spatial size is not static";
  const ir::ConvGeometry g = ir::convGeometry(info.node, {x[2].value, x[3].value}, {3, 3});
  for (int d = 0; d < 2; ++d) {
    if (g.strides[d] != 1 || g.dilations[d] != 1 || g.output[d] <= 0)
      return "takes stride 1, dilation 1";
  }
  return "";
}

// The heuristics' tile for the output size (nchwcWinogradTile): the other tile, or direct when
// there are too few tiles, is passed over; timed tactics try all three.
std::string winogradPassedOver(const KernelCreateInfo& info, int tile) {
  const auto& x = *info.inputTypes[0]->shape;
  const ir::ConvGeometry g = ir::convGeometry(info.node, {x[2].value, x[3].value}, {3, 3});
  const int best = nchwcWinogradTile(g.output[0], g.output[1]);
  if (best == tile) return "";
  return std::to_string(g.output[0]) + "x" + std::to_string(g.output[1]) + " output: " +
         (best ? "the " + std::to_string(best) + "x" + std::to_string(best) +
                     " tile is expected to be faster"
               : std::string("too few tiles, direct is expected to be faster"));
}

// With `saved`, the packed weights are the saved ones (no packing); `bf16` packs them in BF16 for
// the BF16 kernel.
Kernel makeWinograd(const KernelCreateInfo& info, int tile, bool bf16,
                    const KernelState* saved = nullptr) {
  PreparedNchwcConv p = prepareCommon(info);
  if (saved) {
    p.winograd.tile = tile;
    p.winograd.inChannels = p.inPerGroup;
    p.winograd.outChannels = p.outChannels;
    p.winograd.bf16 = bf16;
    p.winograd.floats = nchwcWinogradWeightWords(p.outChannels, p.inPerGroup, tile, bf16);
    p.winograd.data = savedFloats(info, *saved, 0, p.winograd.floats);
  } else {
    const Tensor& w = constantWeights(info);
    p.winograd = packNchwcWinogradWeights(w.data<float>(), p.outChannels, p.inPerGroup, tile);
    if (bf16) p.winograd = packNchwcWinogradBf16Weights(p.winograd);
  }
  p.convolve = [weights = p.winograd](KernelContext& ctx, NchwcConvArgs& args) {
    args.scratch =
        static_cast<float*>(ctx.workspace(nchwcWinogradWorkspaceBytes(*args.shape, weights)));
    nchwcWinogradConv(args, weights);
  };
  Kernel k;
  k.workspace = [weights = p.winograd, p](const std::vector<const Shape*>& in,
                                          int threads) -> uint64_t {
    if (in.empty() || !in[0] || in[0]->size() != 5) return 0;
    NchwcConvShape s;
    s.batch = (*in[0])[0];
    s.inChannels = p.inPerGroup;
    s.outChannels = p.outChannels;
    s.height = (*in[0])[2];
    s.width = (*in[0])[3];
    const bool staticSize = s.height == p.staticHeight && s.width == p.staticWidth;
    const ir::ConvGeometry g =
        staticSize ? p.staticGeometry : ir::convGeometry(p.attrs, {s.height, s.width}, {3, 3});
    s.outHeight = g.output[0];
    s.outWidth = g.output[1];
    if (s.outHeight <= 0 || s.outWidth <= 0) return 0;
    return nchwcWinogradWorkspaceBytes(s, weights, threads);
  };
  k.save = [winograd = p.winograd] {
    KernelState state;
    state.blobs.push_back(
        {winograd.data.get(), static_cast<uint64_t>(winograd.floats) * sizeof(float)});
    state.owner = winograd.data;
    return state;
  };
  k.run = [p = std::move(p)](KernelContext& ctx) { runNchwcConv(ctx, p); };
  return k;
}

// A blocked or plain X convolved directly by nchwcConv on `isa`; the plain copy for AVX2 goes to
// the workspace.
// With `saved`, the packed weights are the saved ones (no packing).
Kernel makeDirect(const KernelCreateInfo& info, CpuIsa isa, const KernelState* saved = nullptr) {
  PreparedNchwcConv p = prepareCommon(info);
  const int64_t xRank = xRankOf(info);  // which layouts to pack for: both when it is not known
  // The layouts this node needs, in the order the state stores them.
  std::vector<std::pair<NchwcPackedWeights*, NchwcWeightLayout>> layouts;
  if (p.depthwise) {
    layouts.emplace_back(&p.blockedWeights, NchwcWeightLayout::kDepthwise);
  } else if (p.group != 1) {  // grouped: blocked X only, packed slice by slice
    layouts.emplace_back(&p.blockedWeights, NchwcWeightLayout::kBlockedInput);
  } else {
    if (xRank != 4) layouts.emplace_back(&p.blockedWeights, NchwcWeightLayout::kBlockedInput);
    if (xRank != 5) layouts.emplace_back(&p.plainWeights, NchwcWeightLayout::kPlainInput);
  }
  for (size_t k = 0; k < layouts.size(); ++k) {
    auto [packed, layout] = layouts[k];
    if (saved) {
      packed->floats = nchwcPackedFloats(p, layout);
      packed->data = savedFloats(info, *saved, k, packed->floats);
    } else if (p.group != 1 && !p.depthwise) {
      *packed = packNchwcGroupedWeights(constantWeights(info).data<float>(), p.outChannels,
                                        p.inPerGroup * p.group, p.group, p.kernelH, p.kernelW);
    } else {
      *packed = packNchwcWeights(constantWeights(info).data<float>(), p.outChannels,
                                 layout == NchwcWeightLayout::kDepthwise ? 1 : p.inPerGroup,
                                 p.kernelH, p.kernelW, layout);
    }
  }
  if (saved && saved->blobs.size() != layouts.size()) {
    throw Error(ErrorCode::kInvalidPlan,
                "layer '" + info.node.name + "': " + std::to_string(saved->blobs.size()) +
                    " packed weights for the " + std::to_string(layouts.size()) +
                    " layouts the kernel packs");
  }
  const bool scaled = hasInputScale(info);
  p.convolve = [isa, scaled](KernelContext& ctx, NchwcConvArgs& args) {
    if (scaled) return runNchwcConvWithInputScale(ctx, args, ctx.input(4), isa);
    args.scratch = static_cast<float*>(
        ctx.workspace(uint64_t(nchwcConvScratchFloats(*args.shape, isa)) * sizeof(float)));
    nchwcConv(args, isa);
  };
  Kernel k;
  const int64_t blockedFloats = p.blockedWeights.floats;
  k.workspace = [p, isa, scaled, blockedFloats](const std::vector<const Shape*>& in,
                                                int) -> uint64_t {
    if (in.empty() || !in[0] || in[0]->size() < 4) return 0;
    if (scaled) return uint64_t(blockedFloats) * sizeof(float);
    if (isa >= CpuIsa::kAvx512) return 0;
    const std::optional<NchwcConvShape> s = plainShapeOf(p, in[0]);
    return s ? uint64_t(nchwcConvScratchFloats(*s, isa)) * sizeof(float) : 0;
  };
  std::vector<NchwcPackedWeights> kept;
  for (const auto& layout : layouts) kept.push_back(*layout.first);
  k.save = [kept] {
    std::vector<const NchwcPackedWeights*> packed;
    for (const NchwcPackedWeights& w : kept) packed.push_back(&w);
    return savedBlobs(packed, {});
  };
  k.run = [p = std::move(p)](KernelContext& ctx) { runNchwcConv(ctx, p); };
  return k;
}

// BF16 Winograd (layers marked bf16), for the convolutions FP32 Winograd takes.
std::string bf16WinogradDeclines(const KernelCreateInfo& info) {
  if (std::string p = bf16PrecisionDeclines(info); !p.empty()) return p;
  return winogradDeclines(info);
}

// The heuristics take BF16 F(2x2) wherever they would take either FP32 tile.
std::string bf16WinogradPassedOver(const KernelCreateInfo& info) {
  const auto& x = *info.inputTypes[0]->shape;
  const ir::ConvGeometry g = ir::convGeometry(info.node, {x[2].value, x[3].value}, {3, 3});
  if (nchwcWinogradTile(g.output[0], g.output[1]) != 0) return "";
  return std::to_string(g.output[0]) + "x" + std::to_string(g.output[1]) +
         " output: too few tiles, direct is expected to be faster";
}

// BF16 direct convolution of a blocked X (layers marked bf16).
std::string bf16DirectDeclines(const KernelCreateInfo& info) {
  if (std::string p = bf16PrecisionDeclines(info); !p.empty()) return p;
  if (hasInputScale(info)) return "X has a scale (input 4)";
  if (ir::attrInt(info.node, "group", 1) != 1) return "grouped or depthwise (takes group 1)";
  return xRankOf(info) == 5 ? "" : "X is not blocked (rank 5)";
}

// With `saved`, the BF16 packing is the saved one.
Kernel makeBf16Direct(const KernelCreateInfo& info, const KernelState* saved) {
  PreparedNchwcConv p = prepareCommon(info);
  const int64_t taps = p.kernelH * p.kernelW;
  if (saved) {
    p.blockedWeights.floats = nchwcBf16WeightWords(p.outChannels, p.inPerGroup, taps);
    p.blockedWeights.data = savedFloats(info, *saved, 0, p.blockedWeights.floats);
  } else {
    const NchwcPackedWeights blocked =
        packNchwcWeights(constantWeights(info).data<float>(), p.outChannels, p.inPerGroup,
                         p.kernelH, p.kernelW, NchwcWeightLayout::kBlockedInput);
    p.blockedWeights = packNchwcBf16Weights(blocked, p.outChannels, p.inPerGroup, taps);
  }
  const auto* words = reinterpret_cast<const uint32_t*>(p.blockedWeights.data.get());
  p.convolve = [words](KernelContext& ctx, NchwcConvArgs& args) {
    auto* pairs = static_cast<uint32_t*>(ctx.workspace(nchwcConvBf16ScratchBytes(*args.shape)));
    detail::nchwcConvBf16Avx512(args, words, pairs);
  };
  Kernel k;
  k.workspace = [](const std::vector<const Shape*>& in, int) -> uint64_t {
    if (in.empty() || !in[0] || in[0]->size() != 5) return 0;
    return static_cast<uint64_t>(shapeNumel(*in[0])) * sizeof(uint16_t);  // X in BF16
  };
  k.save = [w = p.blockedWeights] { return savedBlobs({&w}, {}); };
  k.run = [p = std::move(p)](KernelContext& ctx) { runNchwcConv(ctx, p); };
  return k;
}

// BF16 convolution of a plain X, the stem (layers marked bf16).
std::string bf16PlainInputDeclines(const KernelCreateInfo& info) {
  if (std::string p = bf16PrecisionDeclines(info); !p.empty()) return p;
  if (hasInputScale(info)) return "X has a scale (input 4)";
  if (ir::attrInt(info.node, "group", 1) != 1) return "grouped: needs a blocked X";
  if (xRankOf(info) != 4) return "X is not plain NCHW (rank 4)";
  const std::vector<int64_t> strides = ir::attrInts(info.node, "strides", {1, 1}),
                             dilations = ir::attrInts(info.node, "dilations", {1, 1});
  if (strides.size() != 2 || strides[1] < 1 || strides[1] > 2)
    return "takes horizontal strides 1 and 2";
  if (dilations.size() != 2 || dilations[1] != 1) return "takes horizontal dilation 1";
  return "";
}

// With `saved`, the BF16 packing is the saved one.
Kernel makeBf16PlainInput(const KernelCreateInfo& info, const KernelState* saved) {
  PreparedNchwcConv p = prepareCommon(info);
  if (saved) {
    p.plainWeights.floats =
        nchwcPlainBf16WeightWords(p.outChannels, p.inPerGroup, p.kernelH, p.kernelW);
    p.plainWeights.data = savedFloats(info, *saved, 0, p.plainWeights.floats);
  } else {
    p.plainWeights = packNchwcPlainBf16Weights(constantWeights(info).data<float>(), p.outChannels,
                                               p.inPerGroup, p.kernelH, p.kernelW);
  }
  const auto* words = reinterpret_cast<const uint32_t*>(p.plainWeights.data.get());
  p.convolve = [words](KernelContext& ctx, NchwcConvArgs& args) {
    auto* pairs =
        static_cast<uint32_t*>(ctx.workspace(nchwcPlainConvBf16ScratchBytes(*args.shape)));
    detail::nchwcPlainConvBf16Avx512(args, words, pairs);
  };
  Kernel k;
  k.workspace = [p](const std::vector<const Shape*>& in, int) -> uint64_t {
    const std::optional<NchwcConvShape> s = plainShapeOf(p, in.empty() ? nullptr : in[0]);
    return s ? nchwcPlainConvBf16ScratchBytes(*s) : 0;
  };
  k.save = [w = p.plainWeights] { return savedBlobs({&w}, {}); };
  k.run = [p = std::move(p)](KernelContext& ctx) { runNchwcConv(ctx, p); };
  return k;
}

std::string winograd4x4PassedOver(const KernelCreateInfo& info) {
  return winogradPassedOver(info, 4);
}
std::string winograd2x2PassedOver(const KernelCreateInfo& info) {
  return winogradPassedOver(info, 2);
}
// group == Ci == Co: W is [group, 1, kH, kW].
bool isDepthwise(const KernelCreateInfo& info) {
  const int64_t group = ir::attrInt(info.node, "group", 1);
  const Tensor& w = constantWeights(info);
  return group != 1 && w.dim(0) == group && w.dim(1) == 1;
}
std::string depthwiseDeclines(const KernelCreateInfo& info) {
  if (ir::attrInt(info.node, "group", 1) == 1) return "group is 1, not depthwise";
  return isDepthwise(info) ? "" : "grouped with more than one channel per group, not depthwise";
}
std::string groupedDeclines(const KernelCreateInfo& info) {
  const int64_t group = ir::attrInt(info.node, "group", 1);
  if (group == 1) return "group is 1";
  if (isDepthwise(info)) return "depthwise";
  if (hasInputScale(info)) return "X has a scale (input 4)";
  if (xRankOf(info) != 5) return "X is not blocked (rank 5)";
  const Tensor& w = constantWeights(info);
  return ir::nchwcGroupSlices(w.dim(1) * group, w.dim(0), group).whyNot;
}
std::string plainInputDeclines(const KernelCreateInfo& info) {
  if (ir::attrInt(info.node, "group", 1) != 1) return "grouped: needs a blocked X";
  return xRankOf(info) == 4 ? "" : "X is not plain NCHW (rank 4)";
}
std::string scaledInputDeclines(const KernelCreateInfo& info) {
  return hasInputScale(info) ? "" : "X has no scale (input 4)";
}
std::string directDeclines(const KernelCreateInfo& info) {
  if (ir::attrInt(info.node, "group", 1) != 1) return "grouped (takes group 1)";
  if (hasInputScale(info)) return "X has a scale (input 4)";
  return xRankOf(info) == 4 ? "X is plain NCHW (rank 4)" : "";
}

const bool kRegistered = [] {
  KernelRegistry& r = KernelRegistry::global();
  auto add = [&](const std::string& name, CpuIsa isa,
                 std::string (*declines)(const KernelCreateInfo&),
                 std::function<Kernel(const KernelCreateInfo&)> create,
                 std::function<Kernel(const KernelCreateInfo&, const KernelState&)> restore,
                 std::string (*passedOver)(const KernelCreateInfo&) = nullptr) {
    KernelCandidate c;
    c.id = "f32_nchwc_conv_" + name + "_" + cpuIsaName(isa);
    c.isa = isa;
    c.supports = declines;
    if (passedOver) c.prefers = passedOver;
    c.create = std::move(create);
    c.restore = std::move(restore);
    // The kernels add the residual Z (input 3) when they start each output tile, before any store.
    c.memory.inPlaceInputs = {3};
    r.addCandidate("kiln", "NchwcConv", DataType::kFloat32, std::move(c));
  };
  // BF16 first (they decline layers not marked bf16): Winograd F(2x2) wherever FP32 would take
  // Winograd, else direct. F(4x4) in BF16 is left out: its transforms (coefficients up to 8 and
  // 1/24) amplify the rounding of V and U, ResNet-50's output SNR fell from 20.2 to 15.9 dB
  // (docs/performance.md, "BF16 Winograd").
  KernelCandidate winograd;
  winograd.id = "bf16_nchwc_conv_winograd_f2x2_avx512bf16";
  winograd.isa = CpuIsa::kAvx512Bf16;
  winograd.supports = bf16WinogradDeclines;
  winograd.prefers = bf16WinogradPassedOver;
  winograd.create = [](const KernelCreateInfo& i) { return makeWinograd(i, 2, true); };
  winograd.restore = [](const KernelCreateInfo& i, const KernelState& s) {
    return makeWinograd(i, 2, true, &s);
  };
  winograd.memory.inPlaceInputs = {3};  // as the FP32 kernels: Z is read before Y's tile is stored
  r.addCandidate("kiln", "NchwcConv", DataType::kFloat32, std::move(winograd));
  KernelCandidate bf16;
  bf16.id = "bf16_nchwc_conv_direct_avx512bf16";
  bf16.isa = CpuIsa::kAvx512Bf16;
  bf16.supports = bf16DirectDeclines;
  bf16.create = [](const KernelCreateInfo& i) { return makeBf16Direct(i, nullptr); };
  bf16.restore = [](const KernelCreateInfo& i, const KernelState& s) {
    return makeBf16Direct(i, &s);
  };
  bf16.memory.inPlaceInputs = {3};  // as the FP32 kernels: Z is read at the start of each tile
  r.addCandidate("kiln", "NchwcConv", DataType::kFloat32, std::move(bf16));
  KernelCandidate stem;
  stem.id = "bf16_nchwc_conv_plain_input_avx512bf16";
  stem.isa = CpuIsa::kAvx512Bf16;
  stem.supports = bf16PlainInputDeclines;
  stem.create = [](const KernelCreateInfo& i) { return makeBf16PlainInput(i, nullptr); };
  stem.restore = [](const KernelCreateInfo& i, const KernelState& s) {
    return makeBf16PlainInput(i, &s);
  };
  stem.memory.inPlaceInputs = {3};  // Z is read at the start of each chunk, before its store
  r.addCandidate("kiln", "NchwcConv", DataType::kFloat32, std::move(stem));
  for (int tile : {4, 2}) {
    const std::string name = "winograd_f" + std::to_string(tile) + "x" + std::to_string(tile);
    add(
        name, CpuIsa::kAvx512, winogradDeclines,
        [tile](const KernelCreateInfo& i) { return makeWinograd(i, tile, false); },
        [tile](const KernelCreateInfo& i, const KernelState& s) {
          return makeWinograd(i, tile, false, &s);
        },
        tile == 4 ? winograd4x4PassedOver : winograd2x2PassedOver);
  }
  for (auto [name, declines] :
       {std::pair{"depthwise", &depthwiseDeclines}, std::pair{"grouped", &groupedDeclines},
        std::pair{"plain_input", &plainInputDeclines},
        std::pair{"scaled_input", &scaledInputDeclines}, std::pair{"direct", &directDeclines}}) {
    for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2}) {
      add(
          name, isa, declines, [isa](const KernelCreateInfo& i) { return makeDirect(i, isa); },
          [isa](const KernelCreateInfo& i, const KernelState& s) {
            return makeDirect(i, isa, &s);
          });
    }
  }
  return true;
}();

}  // namespace

}  // namespace kiln::cpu
