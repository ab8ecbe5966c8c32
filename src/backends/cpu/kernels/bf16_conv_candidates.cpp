// BF16 Conv and kiln::FusedConv by im2col + GEMM: the constant W of an ungrouped convolution
// packed once in BF16 as the GEMM's left operand, the column blocks (or X itself, for 1x1)
// rounded to BF16 as they are packed, FP32 sums, bias, residual and activation in FP32.
#include "backends/cpu/kernels/bf16_candidates.h"
#include "backends/cpu/kernels/conv_kernel.h"
#include "ir/node_attrs.h"

namespace kiln::cpu {

std::string bf16GemmConvDeclines(const KernelCreateInfo& info) {
  if (std::string p = bf16PrecisionDeclines(info); !p.empty()) return p;
  const Tensor* w = info.constants.size() > 1 ? info.constants[1] : nullptr;
  if (!w) return "W is not a constant";
  if (w->dtype() != DataType::kFloat32 || w->rank() < 3 || w->numel() == 0)
    return "W " + w->describe() + " is not float32";
  const ir::TypeInfo* x = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  if (!x || x->dtype != DataType::kFloat32) return "X is not float32";
  if (ir::attrInt(info.node, "group", 1) != 1) return "grouped (takes group 1)";
  return "";
}

namespace {

using Side = PackedBf16Matrix::Side;

std::string convDeclines(const KernelCreateInfo& info) {
  if (std::string why = bf16GemmConvDeclines(info); !why.empty()) return why;
  if (info.constants[1]->dim(1) == 1)
    return "one input channel (its taps are accumulated directly)";
  return "";
}

Kernel makeConv(const KernelCreateInfo& info, bool fused, const KernelState* saved) {
  ConvAttrs a = convAttrs(info, fused);
  const Tensor& w = *info.constants[1];  // its shape; a plan may hold no values
  const int64_t outChannels = w.dim(0), depth = w.numel() / outChannels;
  const PackedBf16Matrix packed =
      saved ? savedBf16Matrix(info, *saved, Side::kA, outChannels, depth)
            : packBf16A(false, outChannels, depth, w.data<float>(), depth);
  info.keepsOwnCopyOf(1);
  Kernel k;
  k.save = [packed] { return bf16PackedState(packed, nullptr); };
  const PackedWeightsProduct product{
      [packed](int64_t N, const float* b, int64_t ldb, float* y, int64_t ldy,
               const GemmEpilogue& ep, void* workspace) {
        bf16GemmPacked(packed, N, false, b, ldb, 0.0f, y, ldy, workspace, ep);
      },
      [packed](int64_t N, int) { return bf16GemmWorkspaceBytes(packed, N); }};
  k.workspace = [a, product](const std::vector<const Shape*>& in, int threads) {
    return convWorkspaceBytes(a, in.empty() ? nullptr : in[0], in.size() > 1 ? in[1] : nullptr,
                              sizeof(float), threads, &product);
  };
  k.run = [a = std::move(a), product](KernelContext& ctx) {
    ConvCall c;
    if (startConvCall(ctx, a, c)) convolveIm2colFloat(ctx, a, c, &product);
  };
  return k;
}

}  // namespace

void addBf16ConvCandidate(KernelRegistry& registry, const char* domain, const char* opType,
                          const std::string& prefix, bool fused) {
  KernelCandidate c;
  c.id = prefix + "_im2col_gemm_avx512bf16";
  c.isa = CpuIsa::kAvx512Bf16;
  c.supports = convDeclines;
  c.create = [fused](const KernelCreateInfo& info) { return makeConv(info, fused, nullptr); };
  c.restore = [fused](const KernelCreateInfo& info, const KernelState& s) {
    return makeConv(info, fused, &s);
  };
  registry.addCandidate(domain, opType, DataType::kFloat32, std::move(c));
}

}  // namespace kiln::cpu
