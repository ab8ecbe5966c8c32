// MatMul, Gemm and kiln::FusedMatMul on a constant 2-D float32 B (a Linear layer's weights) kept
// in a reduced-precision packing made once, for the layers the builder marked with that precision
// (ir/precision.h): the shared half of the BF16 candidates (bf16_matmul_candidates.cpp) and the
// FP16-weight ones (f16w_matmul_candidates.cpp). A Format says how its weights are packed, saved
// in a plan and multiplied:
//   using Packed                                   the packing (rows() = K, cols() = N)
//   std::string declines(info)                     "" when the node is marked for this format
//   Packed pack(info, transB, K, N, B, ldb)        from the constant's values
//   Packed saved(info, state, K, N)                from a plan's state
//   KernelState state(packed, owner)               what a plan stores (blob 0 the packing)
//   uint64_t workspace(packed, rows, threads)      scratch of `rows` rows of A on `threads`
//   void multiply(transA, rows, a, lda, packed, y, ldc, workspace, epilogue)   Y = ep(A x B)
#pragma once
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/activation.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/thread_pool.h"
#include "ir/node_attrs.h"

namespace kiln::cpu::packed_linear {

inline const Tensor* constantInput(const KernelCreateInfo& info, size_t i) {
  return info.constants.size() > i ? info.constants[i] : nullptr;
}

// "" when the node is the format's and B (input 1) a constant 2-D float32 matrix, A float32.
template <typename Format>
std::string constantBDeclines(const Format& f, const KernelCreateInfo& info) {
  if (std::string p = f.declines(info); !p.empty()) return p;
  const ir::TypeInfo* a = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  if (!a || a->dtype != DataType::kFloat32) return "A is not float32";
  const Tensor* b = constantInput(info, 1);
  if (!b) return "B is not a constant";
  if (b->dtype() != DataType::kFloat32 || b->rank() != 2 || b->numel() == 0)
    return "B " + b->describe() + " is not a 2-D float32 matrix";
  return "";
}

// Gemm: alpha 1, and C absent or a constant row of N values (a Linear layer's bias), folded,
// times beta, into the epilogue.
template <typename Format>
std::string gemmDeclines(const Format& f, const KernelCreateInfo& info) {
  if (std::string p = constantBDeclines(f, info); !p.empty()) return p;
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

// B packed from the constant (op(B) = B, or B^T when transB), or the packing a plan holds.
template <typename Format>
typename Format::Packed packedWeights(const Format& f, const KernelCreateInfo& info, bool transB,
                                      const KernelState* saved) {
  const Tensor& b = *constantInput(info, 1);  // its shape; a plan may hold no values
  const int64_t K = b.dim(transB ? 1 : 0), N = b.dim(transB ? 0 : 1);
  info.keepsOwnCopyOf(1);
  if (saved) return f.saved(info, *saved, K, N);
  return f.pack(info, transB, K, N, b.data<float>(), b.dim(1));
}

// Y[rows x N] = act(A[rows x K] * B + bias + residual), A float32 [..., K]; the checks name the
// node.
template <typename Format>
void runLinear(const Format& f, KernelContext& ctx, const typename Format::Packed& b, bool transA,
               const GemmEpilogue& ep) {
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
  f.multiply(transA, rows, a.data<float>(), transA ? a.dim(1) : K, b, y.data<float>(), N,
             ctx.workspace(f.workspace(b, rows, poolThreads())), ep);
}

// runLinear's workspace: that of all of A's rows over B's depth.
template <typename Format>
WorkspaceFn linearWorkspace(const Format& f, const typename Format::Packed& b) {
  return [f, b](const std::vector<const Shape*>& in, int threads) -> uint64_t {
    if (in.empty() || !in[0] || b.rows() == 0) return 0;
    return f.workspace(b, shapeNumel(*in[0]) / b.rows(), threads);
  };
}

template <typename Format>
Kernel makeMatMul(const Format& f, const KernelCreateInfo& info, const KernelState* saved) {
  const typename Format::Packed b = packedWeights(f, info, false, saved);
  return {[f, b](KernelContext& ctx) { runLinear(f, ctx, b, false, {}); }, linearWorkspace(f, b),
          [f, b] { return f.state(b, nullptr); }};
}

template <typename Format>
Kernel makeGemm(const Format& f, const KernelCreateInfo& info, const KernelState* saved) {
  const bool transA = ir::attrInt(info.node, "transA", 0) != 0;
  const bool transB = ir::attrInt(info.node, "transB", 0) != 0;
  const float beta = ir::attrFloat(info.node, "beta", 1.0f);
  struct Weights {
    typename Format::Packed b;
    std::vector<float> bias;  // beta * C
  };
  auto w = std::make_shared<Weights>();
  w->b = packedWeights(f, info, transB, saved);
  const Tensor* c = constantInput(info, 2);
  if (saved && saved->blobs.size() > 1) {
    const std::shared_ptr<const float> bias = savedFloats(info.node, *saved, 1, w->b.cols());
    w->bias.assign(bias.get(), bias.get() + w->b.cols());
  } else if (!saved && c && beta != 0.0f) {
    w->bias.assign(c->data<float>(), c->data<float>() + c->numel());
    for (float& v : w->bias) v *= beta;
  }
  if (!w->bias.empty()) info.keepsOwnCopyOf(2);
  return {[f, w, transA](KernelContext& ctx) {
            GemmEpilogue ep;
            ep.bias = w->bias.empty() ? nullptr : w->bias.data();
            if (ctx.input(0).rank() != 2) ctx.fail("A must be 2-D", ErrorCode::kInvalidArgument);
            runLinear(f, ctx, w->b, transA, ep);
          },
          linearWorkspace(f, w->b),
          [f, w] {
            KernelState state = f.state(w->b, w);
            if (!w->bias.empty())
              state.blobs.push_back({w->bias.data(), w->bias.size() * sizeof(float)});
            return state;
          }};
}

template <typename Format>
Kernel makeFusedMatMul(const Format& f, const KernelCreateInfo& info, const KernelState* saved) {
  const typename Format::Packed b = packedWeights(f, info, false, saved);
  const Activation act = fusedActivationOf(info.node);
  return {[f, b, act](KernelContext& ctx) {
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
            runLinear(f, ctx, b, false, ep);
          },
          linearWorkspace(f, b), [f, b] { return f.state(b, nullptr); }};
}

/// Adds the format's candidate `id` (needing `isa`) to the float32 family of domain::opType:
/// MatMul, Gemm or kiln::FusedMatMul.
template <typename Format>
void addCandidate(KernelRegistry& registry, const Format& f, const char* domain,
                  const std::string& opType, const std::string& id, CpuIsa isa) {
  KernelCandidate c;
  c.id = id;
  c.isa = isa;
  const bool gemm = opType == "Gemm", fused = opType == "FusedMatMul";
  c.supports = [f, gemm](const KernelCreateInfo& info) {
    return gemm ? gemmDeclines(f, info) : constantBDeclines(f, info);
  };
  auto make = [f, gemm, fused](const KernelCreateInfo& info, const KernelState* saved) {
    return gemm    ? makeGemm(f, info, saved)
           : fused ? makeFusedMatMul(f, info, saved)
                   : makeMatMul(f, info, saved);
  };
  c.create = [make](const KernelCreateInfo& info) { return make(info, nullptr); };
  c.restore = [make](const KernelCreateInfo& info, const KernelState& s) { return make(info, &s); };
  registry.addCandidate(domain, opType, DataType::kFloat32, std::move(c));
}

}  // namespace kiln::cpu::packed_linear
