// BF16 MatMul, Gemm and kiln::FusedMatMul on a constant 2-D float32 B (a Linear layer's weights)
// packed once in BF16; A rounded to BF16 as it is packed, the products summed in FP32, bias,
// residual and activation applied in FP32 (bf16_candidates.h).
#include <cstring>

#include "backends/cpu/activation.h"
#include "backends/cpu/kernels/bf16_candidates.h"
#include "ir/node_attrs.h"
#include "ir/precision.h"

namespace kiln::cpu {
namespace {

using Side = PackedBf16Matrix::Side;

const Tensor* constantInput(const KernelCreateInfo& info, size_t i) {
  return info.constants.size() > i ? info.constants[i] : nullptr;
}

// "" when B (input 1) is a constant 2-D float32 matrix and A float32.
std::string constantBDeclines(const KernelCreateInfo& info) {
  if (std::string p = bf16PrecisionDeclines(info); !p.empty()) return p;
  const ir::TypeInfo* a = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  if (!a || a->dtype != DataType::kFloat32) return "A is not float32";
  const Tensor* b = constantInput(info, 1);
  if (!b) return "B is not a constant";
  if (b->dtype() != DataType::kFloat32 || b->rank() != 2 || b->numel() == 0)
    return "B " + b->describe() + " is not a 2-D float32 matrix";
  return "";
}

// B packed from the constant (op(B) = B, or B^T when transB), or the packing a plan holds.
PackedBf16Matrix packedWeights(const KernelCreateInfo& info, bool transB,
                               const KernelState* saved) {
  const Tensor& b = *constantInput(info, 1);  // its shape; a plan may hold no values
  const int64_t K = b.dim(transB ? 1 : 0), N = b.dim(transB ? 0 : 1);
  info.keepsOwnCopyOf(1);
  if (saved) return savedBf16Matrix(info, *saved, Side::kB, K, N);
  return packBf16B(transB, K, N, b.data<float>(), b.dim(1));
}

// Y[rows x N] = act(A[rows x K] * B + bias + residual), A float32 [..., K]; the checks name the
// node.
void runLinear(KernelContext& ctx, const PackedBf16Matrix& b, bool transA, const GemmEpilogue& ep,
               float beta) {
  const Tensor& a = ctx.input(0);
  const int64_t K = b.rows(), N = b.cols();
  if (a.dtype() != DataType::kFloat32 || a.rank() < 1)
    ctx.fail("A must be float32, got " + a.describe(), ErrorCode::kInvalidArgument);
  const int64_t aDepth = transA ? a.dim(0) : a.dim(a.rank() - 1);
  if (aDepth != K || (transA && a.rank() != 2)) {
    ctx.fail("inner dimensions differ: A " + a.describe() + " and B [" + std::to_string(K) + "x" +
                 std::to_string(N) + "]",
             ErrorCode::kInvalidArgument);
  }
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  const int64_t rows = K ? a.numel() / K : y.numel() / N;
  bf16GemmPacked(transA, rows, a.data<float>(), transA ? a.dim(1) : K, b, beta, y.data<float>(), N,
                 ctx.workspace(bf16GemmWorkspaceBytes(b, rows)), ep);
}

// runLinear's workspace: the packing of A's rows (all of A over B's depth).
WorkspaceFn linearWorkspace(const PackedBf16Matrix& b) {
  return [b](const std::vector<const Shape*>& in, int) -> uint64_t {
    if (in.empty() || !in[0] || b.rows() == 0) return 0;
    return bf16GemmWorkspaceBytes(b, shapeNumel(*in[0]) / b.rows());
  };
}

Kernel makeMatMul(const KernelCreateInfo& info, const KernelState* saved) {
  const PackedBf16Matrix b = packedWeights(info, false, saved);
  return {[b](KernelContext& ctx) { runLinear(ctx, b, false, {}, 0.0f); }, linearWorkspace(b),
          [b] { return bf16PackedState(b, nullptr); }};
}

// Gemm: alpha 1, and C absent or a constant row of N values (a Linear layer's bias), folded,
// times beta, into the epilogue.
std::string gemmDeclines(const KernelCreateInfo& info) {
  if (std::string p = constantBDeclines(info); !p.empty()) return p;
  if (ir::attrFloat(info.node, "alpha", 1.0f) != 1.0f) return "alpha is not 1";
  if (info.node.inputs.size() > 2 && info.node.inputs[2] != ir::kNoValue &&
      ir::attrFloat(info.node, "beta", 1.0f) != 0.0f) {
    const Tensor* c = constantInput(info, 2);
    const Tensor& b = *constantInput(info, 1);
    const int64_t N = b.dim(ir::attrInt(info.node, "transB", 0) ? 0 : 1);
    const bool row = c && (c->rank() == 1 || (c->rank() == 2 && c->dim(0) == 1));
    if (!row || c->dtype() != DataType::kFloat32 || c->numel() != N)
      return "C is not a constant float32 row of N values";
  }
  return "";
}

Kernel makeGemm(const KernelCreateInfo& info, const KernelState* saved) {
  const bool transA = ir::attrInt(info.node, "transA", 0) != 0;
  const bool transB = ir::attrInt(info.node, "transB", 0) != 0;
  const float beta = ir::attrFloat(info.node, "beta", 1.0f);
  struct Weights {
    PackedBf16Matrix b;
    std::vector<float> bias;  // beta * C
  };
  auto w = std::make_shared<Weights>();
  w->b = packedWeights(info, transB, saved);
  const Tensor* c = constantInput(info, 2);
  if (saved && saved->blobs.size() > 1) {
    const std::shared_ptr<const float> bias = savedFloats(info.node, *saved, 1, w->b.cols());
    w->bias.assign(bias.get(), bias.get() + w->b.cols());
  } else if (!saved && c && beta != 0.0f) {
    w->bias.assign(c->data<float>(), c->data<float>() + c->numel());
    for (float& v : w->bias) v *= beta;
  }
  if (!w->bias.empty()) info.keepsOwnCopyOf(2);
  return {[w, transA](KernelContext& ctx) {
            GemmEpilogue ep;
            ep.bias = w->bias.empty() ? nullptr : w->bias.data();
            if (ctx.input(0).rank() != 2) ctx.fail("A must be 2-D", ErrorCode::kInvalidArgument);
            runLinear(ctx, w->b, transA, ep, 0.0f);
          },
          linearWorkspace(w->b),
          [w] {
            KernelState state = bf16PackedState(w->b, w);
            if (!w->bias.empty())
              state.blobs.push_back({w->bias.data(), w->bias.size() * sizeof(float)});
            return state;
          }};
}

Kernel makeFusedMatMul(const KernelCreateInfo& info, const KernelState* saved) {
  const PackedBf16Matrix b = packedWeights(info, false, saved);
  const Activation act = fusedActivationOf(info.node);
  return {[b, act](KernelContext& ctx) {
            const int64_t N = b.cols();
            const Tensor* bias = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
            const Tensor* residual = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
            if (bias && (bias->dtype() != DataType::kFloat32 || bias->numel() != N)) {
              ctx.fail("bias " + bias->describe() + " must be float32 with " + std::to_string(N) +
                           " values",
                       ErrorCode::kInvalidArgument);
            }
            const Tensor& y = ctx.output(0);
            if (residual &&
                (residual->dtype() != DataType::kFloat32 || residual->shape() != y.shape())) {
              ctx.fail("residual Z " + residual->describe() +
                           " must be float32 shaped like the output " + y.describe(),
                       ErrorCode::kInvalidArgument);
            }
            const GemmEpilogue ep{bias ? bias->data<float>() : nullptr, false, act,
                                  residual ? residual->data<float>() : nullptr, N};
            runLinear(ctx, b, false, ep, 0.0f);
          },
          linearWorkspace(b), [b] { return bf16PackedState(b, nullptr); }};
}

void addCandidate(KernelRegistry& registry, const char* domain, const std::string& opType,
                  const std::string& id, std::string (*declines)(const KernelCreateInfo&),
                  Kernel (*make)(const KernelCreateInfo&, const KernelState*)) {
  KernelCandidate c;
  c.id = id;
  c.isa = CpuIsa::kAvx512Bf16;
  c.supports = declines;
  c.create = [make](const KernelCreateInfo& info) { return make(info, nullptr); };
  c.restore = [make](const KernelCreateInfo& info, const KernelState& s) { return make(info, &s); };
  registry.addCandidate(domain, opType, DataType::kFloat32, std::move(c));
}

}  // namespace

std::string bf16PrecisionDeclines(const KernelCreateInfo& info) {
  const std::string p = ir::nodePrecision(info.node);
  if (p == ir::kPrecisionBf16) return "";
  return "the layer computes in " + (p.empty() ? std::string("its tensors' type") : p) +
         ", not bf16";
}

KernelState bf16PackedState(const PackedBf16Matrix& packed, std::shared_ptr<const void> owner) {
  KernelState state;
  const int64_t kc = packed.depthBlock();
  state.params.resize(sizeof(kc));
  std::memcpy(state.params.data(), &kc, sizeof(kc));
  state.blobs.push_back({packed.data(), packed.bytes()});
  // The packing's own storage keeps the blob alive when no owner is given.
  state.owner = owner ? std::move(owner)
                      : std::shared_ptr<const void>(packed.data(), [packed](const void*) {});
  return state;
}

PackedBf16Matrix savedBf16Matrix(const KernelCreateInfo& info, const KernelState& state,
                                 PackedBf16Matrix::Side side, int64_t rows, int64_t cols) {
  int64_t kc = 0;
  if (state.params.size() != sizeof(kc)) {
    throw Error(ErrorCode::kInvalidPlan,
                "layer '" + info.node.name + "': the BF16 kernel's state has " +
                    std::to_string(state.params.size()) + " parameter bytes, not 8");
  }
  std::memcpy(&kc, state.params.data(), sizeof(kc));
  if (kc < 2 || kc % 2 != 0 || kc > (int64_t{1} << 20)) {
    throw Error(ErrorCode::kInvalidPlan, "layer '" + info.node.name + "': BF16 depth block " +
                                             std::to_string(kc) + " is not a positive even size");
  }
  const std::shared_ptr<const float> words =
      savedFloats(info.node, state, 0,
                  PackedBf16Matrix::packedWords(side, rows, cols));  // 32-bit words as floats
  return PackedBf16Matrix::view(
      side, rows, cols, kc,
      std::shared_ptr<const uint32_t>(words, reinterpret_cast<const uint32_t*>(words.get())));
}

void addBf16MatMulCandidate(KernelRegistry& registry, const std::string& opType) {
  if (opType == "Gemm") {
    addCandidate(registry, "", opType, "bf16_gemm_packed_b_avx512bf16", gemmDeclines, makeGemm);
  } else {
    addCandidate(registry, "", opType, "bf16_matmul_packed_b_avx512bf16", constantBDeclines,
                 makeMatMul);
  }
}

void addBf16FusedMatMulCandidate(KernelRegistry& registry) {
  addCandidate(registry, "kiln", "FusedMatMul", "bf16_fused_matmul_packed_b_avx512bf16",
               constantBDeclines, makeFusedMatMul);
}

}  // namespace kiln::cpu
