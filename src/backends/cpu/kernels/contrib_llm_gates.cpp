// CPU kernels of com.microsoft LinearAttentionGate and MoEGroupRouter (shape rules and semantics
// in ir/ops/contrib_llm_gates.cpp). Both compute in float32 and round once to the tensor type, as
// onnxruntime does; shapes were checked by the shape rules, which run again on the concrete shapes
// of every call.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/gate_math.h"
#include "backends/cpu/kernels/node_label.h"

namespace kiln::cpu {
namespace {

template <typename T>
float load(const T* p, int64_t i) {
  return static_cast<float>(static_cast<ComputeType<T>>(p[i]));
}

void linearAttentionGateKernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const int64_t heads = a.dim(a.rank() - 1);
  const float* bias = ctx.input(1).data<float>();
  const float* scale = ctx.input(2).data<float>();
  Tensor& decay = ctx.output(0);
  Tensor* beta = ctx.wantsOutput(1) ? &ctx.output(1) : nullptr;
  dispatchFloat(a.dtype(), "LinearAttentionGate", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = a.data<T>();
    const T* b = beta ? ctx.input(3).template data<T>() : nullptr;
    T* outDecay = decay.data<T>();
    T* outBeta = beta ? beta->data<T>() : nullptr;
    parallelForAtLeast(a.numel(), kMinElementsPerThread, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t h = i % heads;
        outDecay[i] = static_cast<T>(scale[h] * softplus(load(in, i) + bias[h]));
        if (outBeta) outBeta[i] = static_cast<T>(stableSigmoid(load(b, i)));
      }
    });
  });
}

struct RouterParams {
  int64_t topK, groups, topkGroup, groupTopk;
  float sentinel;
};

RouterParams routerParams(const ir::Node& node) {
  return {ir::attrInt(node, "top_k"), ir::attrInt(node, "n_group", 1),
          ir::attrInt(node, "topk_group", 1), ir::attrInt(node, "group_topk", 2),
          ir::attrFloat(node, "router_sentinel", -10000.0f)};
}

/// The indices of the `count` best scores not yet taken, best first, marking them taken; the lower
/// index wins a tie (and a NaN never beats what came before, as in a scan keeping the first
/// maximum).
std::vector<int64_t> takeBest(const float* score, int64_t n, std::vector<char>& taken,
                              int64_t count) {
  std::vector<int64_t> picked;
  for (int64_t k = 0; k < count; ++k) {
    int64_t best = -1;
    for (int64_t i = 0; i < n; ++i)
      if (!taken[i] && (best < 0 || score[i] > score[best])) best = i;
    if (best < 0) break;
    taken[best] = 1;
    picked.push_back(best);
  }
  return picked;
}

/// One token's routed log-scores: the topk_group groups with the largest sums of their group_topk
/// best biased scores, then the top_k best biased scores among those groups' experts.
template <typename T>
void routeToken(const float* sig, const float* bias, int64_t experts, const RouterParams& p,
                T* out) {
  const int64_t size = experts / p.groups;
  const int64_t perGroup = std::min(p.groupTopk, size);
  std::vector<float> biased(static_cast<size_t>(experts));
  for (int64_t e = 0; e < experts; ++e) biased[e] = sig[e] + bias[e];
  std::vector<float> groupScore(static_cast<size_t>(p.groups));
  for (int64_t g = 0; g < p.groups; ++g) {
    std::vector<char> none(static_cast<size_t>(size), 0);
    float sum = 0.0f;
    for (int64_t i : takeBest(biased.data() + g * size, size, none, perGroup))
      sum += biased[g * size + i];
    groupScore[g] = sum;
  }
  std::vector<char> groupTaken(static_cast<size_t>(p.groups), 0);
  takeBest(groupScore.data(), p.groups, groupTaken, p.topkGroup);
  // The experts of unchosen groups count as taken, so they are never selected.
  std::vector<char> taken(static_cast<size_t>(experts), 0);
  for (int64_t e = 0; e < experts; ++e) taken[e] = groupTaken[e / size] ? 0 : 1;
  for (int64_t e = 0; e < experts; ++e) out[e] = static_cast<T>(p.sentinel);
  for (int64_t e : takeBest(biased.data(), experts, taken, p.topK))
    out[e] = static_cast<T>(std::log(std::max(sig[e], 1e-20f)));
}

void moeGroupRouterKernel(KernelContext& ctx, const RouterParams& p) {
  const Tensor& x = ctx.input(0);
  const float* bias = ctx.input(1).data<float>();
  const bool full = ctx.wantsOutput(1);
  const Tensor* weight = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
  const int64_t width = x.dim(x.rank() - 1);
  const int64_t experts = weight ? weight->dim(0) : width;
  const int64_t rows = experts == 0 ? 0 : (weight ? x.dim(0) : x.numel() / width);
  Tensor* probs = ctx.wantsOutput(0) ? &ctx.output(0) : nullptr;
  Tensor* selection = full ? &ctx.output(1) : nullptr;
  Tensor* weights = full ? &ctx.output(2) : nullptr;
  dispatchFloat(x.dtype(), "MoEGroupRouter", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    const T* w = weight ? weight->template data<T>() : nullptr;
    parallelForAtLeast(rows, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> sig(static_cast<size_t>(experts));
      for (int64_t r = begin; r < end; ++r) {
        for (int64_t e = 0; e < experts; ++e) {
          float v = 0.0f;
          if (w) {
            // The projection accumulates in float32 with no rounding to T before the sigmoid.
            for (int64_t k = 0; k < width; ++k)
              v += load(in, r * width + k) * load(w, e * width + k);
          } else {
            v = load(in, r * experts + e);
          }
          sig[e] = full ? 1.0f / (1.0f + std::exp(-v)) : stableSigmoid(v);
        }
        if (full) {
          float* s = selection->data<float>() + r * experts;
          float* u = weights->data<float>() + r * experts;
          for (int64_t e = 0; e < experts; ++e) {
            u[e] = sig[e];
            s[e] = sig[e] + bias[e];
          }
        } else if (probs) {
          routeToken(sig.data(), bias, experts, p, probs->data<T>() + r * experts);
        }
      }
    });
  });
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "LinearAttentionGate",
                                KernelFn(linearAttentionGateKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "MoEGroupRouter",
                                bindKernel(routerParams, moeGroupRouterKernel));

}  // namespace kiln::cpu
