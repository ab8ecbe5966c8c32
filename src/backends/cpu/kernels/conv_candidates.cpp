// The float32 kernels of Conv and kiln::FusedConv, in the order they are tried (the one place
// their algorithm and ISA are chosen): BF16 im2col + GEMM for layers the builder marked bf16
// (bf16_candidates.h), depthwise K x K, few output channels, Winograd F(2x2, 3x3) (which the
// heuristics keep for 256 channels or more; timed tactics try it on every 3x3 it can run),
// then im2col + GEMM, which takes every node. Each but the last needs X's and W's spatial sizes
// static (a dynamic batch is fine), so that its choice holds for every run. The GEMM-based ones
// come twice, for the AVX-512 and AVX2 micro-kernels of sgemm (gemm/sgemm.h), which packs W for
// one.
#include <memory>
#include <string>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/bf16_candidates.h"
#include "backends/cpu/kernels/conv_depthwise.h"
#include "backends/cpu/kernels/conv_few_outputs.h"
#include "backends/cpu/kernels/conv_kernel.h"
#include "backends/cpu/kernels/conv_winograd.h"

namespace kiln::cpu {
namespace {

// What the specialised candidates need to know at build time: the geometry and channel counts.
struct StaticConv {
  ConvAttrs attrs;
  int64_t channels = 0, outChannels = 0, groupChannels = 0;
  std::string problem;  // why the sizes are not static, "" when they are
};

StaticConv staticConv(const KernelCreateInfo& info, bool fused) {
  StaticConv s;
  s.attrs = convAttrs(info, fused);
  const ir::TypeInfo* x = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  const ir::TypeInfo* w = info.inputTypes.size() > 1 ? info.inputTypes[1] : nullptr;
  if (!s.attrs.geometry) {
    s.problem = "X's or W's spatial size is not static";
    return s;
  }
  if (!(*x->shape)[1].isKnown() || !(*w->shape)[0].isKnown() || !(*w->shape)[1].isKnown()) {
    s.problem = "the channel counts are not static";
    return s;
  }
  s.channels = (*x->shape)[1].value;
  s.outChannels = (*w->shape)[0].value;
  s.groupChannels = (*w->shape)[1].value;
  return s;
}

std::string shapeText(const ConvAttrs& a) {
  std::string k;
  for (int64_t d : a.geometry->kernel) k += (k.empty() ? "" : "x") + std::to_string(d);
  return "kernel " + k + ", stride " + std::to_string(a.geometry->strides[0]) + ", group " +
         std::to_string(a.group);
}

// The shape of constant W (its values may have been left out of a plan).
const Tensor* constantWShape(const KernelCreateInfo& info) {
  return info.constants.size() > 1 ? info.constants[1] : nullptr;
}

const Tensor* constantW(const KernelCreateInfo& info) {
  const Tensor* w = info.constants.size() > 1 ? info.constants[1] : nullptr;
  return w && w->dtype() == DataType::kFloat32 ? w : nullptr;
}

std::string depthwiseDeclines(const KernelCreateInfo& info, bool fused) {
  const StaticConv s = staticConv(info, fused);
  if (!s.problem.empty()) return s.problem;
  if (s.groupChannels != 1 || s.outChannels != s.attrs.group || s.channels != s.attrs.group)
    return "not depthwise (" + shapeText(s.attrs) + ", " + std::to_string(s.channels) +
           " channels)";
  if (!depthwiseConv2dSupported(*s.attrs.geometry))
    return shapeText(s.attrs) + ": takes 2-D square 3/5/7 kernels, stride 1 or 2, dilation 1";
  return "";
}

Kernel makeDepthwise(const KernelCreateInfo& info, bool fused, CpuIsa isa) {
  ConvAttrs a = convAttrs(info, fused);
  return {[a = std::move(a), isa](KernelContext& ctx) {
            ConvCall c;
            if (!startConvCall(ctx, a, c)) return;
            const Tensor& x = *c.x;
            depthwiseConv2d(c.g, x.dim(0), x.dim(1), x.dim(2), x.dim(3), x.data<float>(),
                            c.w->data<float>(), c.bias ? c.bias->data<float>() : nullptr,
                            c.residual ? c.residual->data<float>() : nullptr, a.act,
                            c.y->data<float>(), isa);
          },
          {},
          {}};
}

std::string fewOutputsDeclines(const KernelCreateInfo& info, bool fused) {
  const StaticConv s = staticConv(info, fused);
  if (!s.problem.empty()) return s.problem;
  if (!fewOutputConvPreferred(*s.attrs.geometry, s.attrs.group, s.channels, s.outChannels)) {
    return std::to_string(s.outChannels) + " output channels, " + shapeText(s.attrs) +
           ": takes group 1, stride 1, dilation 1, kernels up to 11x11 and at most 16 output "
           "channels (4 for 1x1)";
  }
  return "";
}

// With `saved`, W's reordering is the saved one (no packing).
Kernel makeFewOutputs(const KernelCreateInfo& info, bool fused, CpuIsa isa,
                      const KernelState* saved = nullptr) {
  ConvAttrs a = convAttrs(info, fused);
  std::shared_ptr<const FewOutputWeights> packed;
  if (saved) {
    const Tensor* w = constantWShape(info);
    if (!w)
      throw Error(
          ErrorCode::kInvalidPlan,
          "layer '" + info.node.name + "': packed weights for a W the kernel does not pack");
    FewOutputWeights p{w->dim(0), w->dim(1), w->dim(2), w->dim(3), {}};
    p.packed = savedFloats(info.node, *saved, 0, p.floats());
    packed = std::make_shared<const FewOutputWeights>(std::move(p));
    info.keepsOwnCopyOf(1);
  } else if (const Tensor* w = constantW(info)) {
    packed = std::make_shared<const FewOutputWeights>(
        packFewOutputWeights(w->data<float>(), w->dim(0), w->dim(1), w->dim(2), w->dim(3)));
    info.keepsOwnCopyOf(1);
  }
  Kernel k{[a = std::move(a), packed, isa](KernelContext& ctx) {
             ConvCall c;
             if (!startConvCall(ctx, a, c)) return;
             const Tensor& x = *c.x;
             FewOutputWeights computed;  // W computed at run time
             if (!packed)
               computed = packFewOutputWeights(c.w->data<float>(), c.w->dim(0), c.w->dim(1),
                                               c.w->dim(2), c.w->dim(3));
             fewOutputConv2d(c.g, x.dim(0), x.dim(2), x.dim(3), x.data<float>(),
                             packed ? *packed : computed, c.bias ? c.bias->data<float>() : nullptr,
                             c.residual ? c.residual->data<float>() : nullptr, a.act,
                             c.y->data<float>(), isa);
           },
           {},
           {}};
  if (packed) {
    k.save = [packed] {
      return KernelState{
          {},
          {{packed->packed.get(), static_cast<uint64_t>(packed->floats()) * sizeof(float)}},
          packed};
    };
  }
  return k;
}

std::string winogradDeclines(const KernelCreateInfo& info, bool fused) {
  const StaticConv s = staticConv(info, fused);
  if (!s.problem.empty()) return s.problem;
  if (!winogradApplies(*s.attrs.geometry, s.attrs.group)) {
    return shapeText(s.attrs) +
           ": takes 3x3 stride-1 dilation-1 ungrouped convolutions with outputs of 2x2 or more";
  }
  return "";
}

std::string winogradPassedOver(const KernelCreateInfo& info, bool fused) {
  const StaticConv s = staticConv(info, fused);
  if (winogradPreferred(*s.attrs.geometry, s.channels, s.outChannels)) return "";
  return std::to_string(s.channels) + " -> " + std::to_string(s.outChannels) +
         " channels: im2col + GEMM is expected to be faster below 256 channels in and out or "
         "outputs under 4x4";
}

// A packed matrix's bytes as a state blob, and one back from a saved state (checked against its
// size).
KernelBlob blobOf(const PackedMatrix& m) {
  return {m.data(), static_cast<uint64_t>(m.floats()) * sizeof(float)};
}
PackedMatrix savedMatrix(const KernelCreateInfo& info, const KernelState& state, size_t k,
                         PackedMatrix::Side side, CpuIsa isa, int64_t rows, int64_t cols) {
  return PackedMatrix::view(
      side, isa, rows, cols,
      savedFloats(info.node, state, k, PackedMatrix::packedFloats(side, isa, rows, cols)));
}

// With `saved`, the 16 packed filter matrices are the saved ones (no packing).
Kernel makeWinograd(const KernelCreateInfo& info, bool fused, CpuIsa isa,
                    const KernelState* saved = nullptr) {
  ConvAttrs a = convAttrs(info, fused);
  std::shared_ptr<const WinogradWeights> packed;
  if (saved) {
    const Tensor* w = constantWShape(info);
    WinogradWeights filters;
    for (size_t xi = 0; xi < 16; ++xi)
      filters.u.push_back(
          savedMatrix(info, *saved, xi, PackedMatrix::Side::kA, isa, w->dim(0), w->dim(1)));
    packed = std::make_shared<const WinogradWeights>(std::move(filters));
    info.keepsOwnCopyOf(1);
  } else if (const Tensor* w = constantW(info)) {
    packed = std::make_shared<const WinogradWeights>(
        packWinogradFilters(w->data<float>(), w->dim(0), w->dim(1), isa));
    info.keepsOwnCopyOf(1);
  }
  std::function<KernelState()> save;
  if (packed) {
    save = [packed] {
      KernelState state;
      for (const PackedMatrix& u : packed->u) state.blobs.push_back(blobOf(u));
      state.owner = packed;
      return state;
    };
  }
  return {
      [a = std::move(a), packed, isa](KernelContext& ctx) {
        ConvCall c;
        if (!startConvCall(ctx, a, c)) return;
        const Tensor& x = *c.x;
        WinogradWeights computed;  // W computed at run time
        if (!packed)
          computed = packWinogradFilters(c.w->data<float>(), c.w->dim(0), c.w->dim(1), isa);
        const WinogradWeights& filters = packed ? *packed : computed;
        void* ws = ctx.workspace(
            winogradWorkspaceBytes(c.g, x.dim(1), c.w->dim(0), filters.u[0].isa(), poolThreads()));
        winogradConv2d(c.g, x.dim(0), x.dim(1), x.dim(2), x.dim(3), c.w->dim(0), x.data<float>(),
                       filters, c.y->data<float>(), ws,
                       WinogradEpilogue{c.bias ? c.bias->data<float>() : nullptr,
                                        c.residual ? c.residual->data<float>() : nullptr, a.act});
      },
      [a, isa](const std::vector<const Shape*>& in, int threads) -> uint64_t {
        const std::optional<ir::ConvGeometry> g =
            convGeometryFor(a, in.empty() ? nullptr : in[0], in.size() > 1 ? in[1] : nullptr);
        return g ? winogradWorkspaceBytes(*g, (*in[0])[1], (*in[1])[0], isa, threads) : 0;
      },
      std::move(save)};
}

// With `saved`, W's packing is the saved one (no packing).
Kernel makeIm2col(const KernelCreateInfo& info, bool fused, CpuIsa isa,
                  const KernelState* saved = nullptr) {
  ConvAttrs a = convAttrs(info, fused);
  PackedMatrix packed;
  const Tensor* w = saved ? constantWShape(info) : constantW(info);
  // Packed as the GEMM's left operand when ungrouped; W with one input channel takes the
  // direct tap path, which reads W itself.
  if (w && w->rank() >= 3 && a.group == 1) {
    const int64_t outChannels = w->dim(0), depth = w->numel() / std::max<int64_t>(outChannels, 1);
    packed = saved ? savedMatrix(info, *saved, 0, PackedMatrix::Side::kA, isa, outChannels, depth)
                   : packA(false, outChannels, depth, w->data<float>(), depth, isa);
    if (w->dim(1) > 1) info.keepsOwnCopyOf(1);
  }
  if (saved && packed.empty())
    throw Error(ErrorCode::kInvalidPlan,
                "layer '" + info.node.name + "': packed weights for a W the kernel does not pack");
  Kernel k;
  if (!packed.empty()) {
    k.save = [packed] {
      return KernelState{
          {}, {blobOf(packed)}, std::shared_ptr<const void>(packed.data(), [](const void*) {})};
    };
  }
  // W packed is the left operand of every weight product (a W of one input channel is not).
  std::optional<PackedWeightsProduct> product;
  if (!packed.empty()) product = sgemmWeightsProduct(packed);
  k.workspace = [a, product](const std::vector<const Shape*>& in, int threads) {
    return convWorkspaceBytes(a, in.empty() ? nullptr : in[0], in.size() > 1 ? in[1] : nullptr,
                              sizeof(float), threads, product ? &*product : nullptr);
  };
  k.run = [a = std::move(a), product](KernelContext& ctx) {
    ConvCall c;
    if (startConvCall(ctx, a, c)) convolveIm2colFloat(ctx, a, c, product ? &*product : nullptr);
  };
  return k;
}

void addConvCandidates(const char* domain, const char* opType, const std::string& prefix,
                       bool fused) {
  KernelRegistry& r = KernelRegistry::global();
  auto add = [&](const std::string& name, CpuIsa isa,
                 std::string (*declines)(const KernelCreateInfo&, bool),
                 std::function<Kernel(const KernelCreateInfo&)> create,
                 std::function<Kernel(const KernelCreateInfo&, const KernelState&)> restore = {},
                 std::string(*passedOver)(const KernelCreateInfo&, bool) = nullptr) {
    KernelCandidate c;
    c.id = prefix + "_" + name + "_" + cpuIsaName(isa);
    c.isa = isa;
    if (declines)
      c.supports = [declines, fused](const KernelCreateInfo& info) {
        return declines(info, fused);
      };
    if (passedOver)
      c.prefers = [passedOver, fused](const KernelCreateInfo& info) {
        return passedOver(info, fused);
      };
    c.create = std::move(create);
    c.restore = std::move(restore);
    r.addCandidate(domain, opType, DataType::kFloat32, std::move(c));
  };
  addBf16ConvCandidate(r, domain, opType, "bf16" + prefix.substr(prefix.find('_')), fused);
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2}) {
    add("depthwise", isa, depthwiseDeclines,
        [fused, isa](const KernelCreateInfo& i) { return makeDepthwise(i, fused, isa); });
  }
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2}) {
    add(
        "few_outputs", isa, fewOutputsDeclines,
        [fused, isa](const KernelCreateInfo& i) { return makeFewOutputs(i, fused, isa); },
        [fused, isa](const KernelCreateInfo& i, const KernelState& s) {
          return makeFewOutputs(i, fused, isa, &s);
        });
  }
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2}) {
    add(
        "winograd_f2x2", isa, winogradDeclines,
        [fused, isa](const KernelCreateInfo& i) { return makeWinograd(i, fused, isa); },
        [fused, isa](const KernelCreateInfo& i, const KernelState& s) {
          return makeWinograd(i, fused, isa, &s);
        },
        winogradPassedOver);
  }
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2}) {
    add(
        "im2col_gemm", isa, nullptr,
        [fused, isa](const KernelCreateInfo& i) { return makeIm2col(i, fused, isa); },
        [fused, isa](const KernelCreateInfo& i, const KernelState& s) {
          return makeIm2col(i, fused, isa, &s);
        });
  }
}

const bool kRegistered = [] {
  addConvCandidates("", "Conv", "f32_conv", false);
  addConvCandidates("kiln", "FusedConv", "f32_fused_conv", true);
  // ONNX Runtime's FusedConv (its saved optimized models) has kiln::FusedConv's inputs and
  // attributes.
  addConvCandidates("com.microsoft", "FusedConv", "f32_ms_fused_conv", true);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
