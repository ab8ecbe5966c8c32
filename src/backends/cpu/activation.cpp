// Vectorized epilogue loops: one pass per row, the activation written on 8-float vectors so
// sigmoid's exp and gelu's erf vectorize (the auto-vectorizer cannot call std::exp/erf).
#include "backends/cpu/activation.h"

#include <cmath>

#include "backends/cpu/kernels/softmax_exp.h"
#include "ir/node_attrs.h"

namespace kiln::cpu {
namespace {

template <typename V>
V constant(float c) {
  if constexpr (std::is_same_v<V, float>) return c;
  else return splat(c);
}

template <typename V>
V maxOf(V a, V b) { return a > b ? a : b; }
template <typename V>
V minOf(V a, V b) { return a < b ? a : b; }

template <typename V>
V sigmoidOf(V x) {
  // 1 / (1 + exp(-x)); exp is clamped inside, so large |x| give 0 or 1 without NaNs.
  return constant<V>(1.0f) / (constant<V>(1.0f) + expKernel<V, std::conditional_t<std::is_same_v<V, float>, int32_t, Int8>>(-x));
}

// erf(x) by Abramowitz & Stegun 7.1.26 refined: |error| < 1.5e-7, odd symmetry restored by sign.
template <typename V>
V erfOf(V x) {
  const V ax = maxOf<V>(x, -x);
  const V t = constant<V>(1.0f) / (constant<V>(1.0f) + constant<V>(0.3275911f) * ax);
  V p = t * constant<V>(1.061405429f) + constant<V>(-1.453152027f);
  p = p * t + constant<V>(1.421413741f);
  p = p * t + constant<V>(-0.284496736f);
  p = p * t + constant<V>(0.254829592f);
  p = p * t;
  using I = std::conditional_t<std::is_same_v<V, float>, int32_t, Int8>;
  const V e = constant<V>(1.0f) - p * expKernel<V, I>(-ax * ax);
  return x < constant<V>(0.0f) ? -e : e;
}

template <typename V>
V activate(const Activation& a, V x) {
  switch (a.kind) {
    case ActivationKind::kNone: return x;
    case ActivationKind::kRelu: return maxOf<V>(x, constant<V>(0.0f));
    case ActivationKind::kClip: return minOf<V>(maxOf<V>(x, constant<V>(a.alpha)), constant<V>(a.beta));
    case ActivationKind::kLeakyRelu: return x < constant<V>(0.0f) ? x * a.alpha : x;
    case ActivationKind::kSigmoid: return sigmoidOf<V>(x);
    case ActivationKind::kHardSigmoid:
      return minOf<V>(maxOf<V>(x * a.alpha + a.beta, constant<V>(0.0f)), constant<V>(1.0f));
    case ActivationKind::kHardSwish:
      return x * minOf<V>(maxOf<V>(x * (1.0f / 6.0f) + 0.5f, constant<V>(0.0f)), constant<V>(1.0f));
    case ActivationKind::kSiLU: return x * sigmoidOf<V>(x);
    case ActivationKind::kGelu: return x * 0.5f * (constant<V>(1.0f) + erfOf<V>(x * 0.70710678118654752f));
  }
  return x;
}

// The bias is one value for the row (a conv channel) or one per element (a matmul row).
template <ActivationKind K, bool kBiasPerElement>
void epilogueLoop(const Activation& act, float* row, int64_t n, const float* bias, const float* residual) {
  Activation a = act;
  a.kind = K;
  int64_t i = 0;
  const Float8 rowBias = splat(kBiasPerElement || !bias ? 0.0f : *bias);
  for (; i + 8 <= n; i += 8) {
    Float8 v = load8(row + i);
    if constexpr (kBiasPerElement) v += load8(bias + i);
    else v += rowBias;
    if (residual) v += load8(residual + i);
    store8(row + i, activate<Float8>(a, v));
  }
  for (; i < n; ++i) {
    const float b = kBiasPerElement ? bias[i] : rowBias[0];
    row[i] = activate<float>(a, row[i] + b + (residual ? residual[i] : 0.0f));
  }
}

template <bool kBiasPerElement>
void dispatchEpilogue(const Activation& act, float* row, int64_t n, const float* bias, const float* residual) {
  switch (act.kind) {
    case ActivationKind::kNone:
      if (!bias && !residual) return;
      return epilogueLoop<ActivationKind::kNone, kBiasPerElement>(act, row, n, bias, residual);
    case ActivationKind::kRelu: return epilogueLoop<ActivationKind::kRelu, kBiasPerElement>(act, row, n, bias, residual);
    case ActivationKind::kClip: return epilogueLoop<ActivationKind::kClip, kBiasPerElement>(act, row, n, bias, residual);
    case ActivationKind::kLeakyRelu:
      return epilogueLoop<ActivationKind::kLeakyRelu, kBiasPerElement>(act, row, n, bias, residual);
    case ActivationKind::kSigmoid:
      return epilogueLoop<ActivationKind::kSigmoid, kBiasPerElement>(act, row, n, bias, residual);
    case ActivationKind::kHardSigmoid:
      return epilogueLoop<ActivationKind::kHardSigmoid, kBiasPerElement>(act, row, n, bias, residual);
    case ActivationKind::kHardSwish:
      return epilogueLoop<ActivationKind::kHardSwish, kBiasPerElement>(act, row, n, bias, residual);
    case ActivationKind::kSiLU: return epilogueLoop<ActivationKind::kSiLU, kBiasPerElement>(act, row, n, bias, residual);
    case ActivationKind::kGelu: return epilogueLoop<ActivationKind::kGelu, kBiasPerElement>(act, row, n, bias, residual);
  }
}

}  // namespace

std::optional<ActivationKind> activationKindFromName(const std::string& name) {
  if (name.empty()) return ActivationKind::kNone;
  if (name == "Relu") return ActivationKind::kRelu;
  if (name == "Clip") return ActivationKind::kClip;
  if (name == "LeakyRelu") return ActivationKind::kLeakyRelu;
  if (name == "Sigmoid") return ActivationKind::kSigmoid;
  if (name == "HardSigmoid") return ActivationKind::kHardSigmoid;
  if (name == "HardSwish") return ActivationKind::kHardSwish;
  if (name == "SiLU") return ActivationKind::kSiLU;
  if (name == "Gelu") return ActivationKind::kGelu;
  return std::nullopt;
}

const char* activationName(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kNone: return "";
    case ActivationKind::kRelu: return "Relu";
    case ActivationKind::kClip: return "Clip";
    case ActivationKind::kLeakyRelu: return "LeakyRelu";
    case ActivationKind::kSigmoid: return "Sigmoid";
    case ActivationKind::kHardSigmoid: return "HardSigmoid";
    case ActivationKind::kHardSwish: return "HardSwish";
    case ActivationKind::kSiLU: return "SiLU";
    case ActivationKind::kGelu: return "Gelu";
  }
  return "";
}

Activation fusedActivationOf(const ir::Node& node) {
  const std::string name = ir::attrString(node, "activation", "");
  const std::optional<ActivationKind> kind = activationKindFromName(name);
  if (!kind) ir::failNode(node, "unknown fused activation '" + name + "'", ErrorCode::kUnsupportedNode);
  const std::vector<float> params = ir::attrFloats(node, "activation_params", {});
  return Activation{*kind, params.size() > 0 ? params[0] : 0.0f, params.size() > 1 ? params[1] : 0.0f};
}

void applyEpilogue(const Activation& act, float* row, int64_t n, float bias, const float* residual) {
  dispatchEpilogue<false>(act, row, n, bias == 0.0f ? nullptr : &bias, residual);
}

void applyEpilogueWithBiasRow(const Activation& act, float* row, int64_t n, const float* bias, const float* residual) {
  dispatchEpilogue<true>(act, row, n, bias, residual);
}

}  // namespace kiln::cpu
