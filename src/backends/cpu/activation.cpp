// Vectorized epilogue loops: one pass per row, the activation (activation_simd.h) on 8-float
// vectors so sigmoid's exp and gelu's erf vectorize (the auto-vectorizer cannot call std::exp/erf),
// or on 16-float vectors in activation_avx512.cpp when the CPU has AVX-512.
#include "backends/cpu/activation.h"

#include "backends/cpu/activation_row.h"
#include "backends/cpu/activation_simd.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/thread_pool.h"
#include "ir/node_attrs.h"

namespace kiln::cpu {
namespace {

// The bias is one value for the row (a conv channel) or one per element (a matmul row). Two
// vectors per step so that the two exp chains overlap.
template <ActivationKind K, bool kBiasPerElement>
void epilogueLoop(const Activation& a, float* row, int64_t n, const float* bias,
                  const float* residual) {
  int64_t i = 0;
  const Float8 rowBias = splat(kBiasPerElement || !bias ? 0.0f : *bias);
  auto in = [&](int64_t j) {
    Float8 v = load8(row + j);
    if constexpr (kBiasPerElement) {
      if (bias) v += load8(bias + j);  // applyEpilogueWithBiasRow allows no bias
    } else {
      v += rowBias;
    }
    if (residual) v += load8(residual + j);
    return v;
  };
  for (; i + 16 <= n; i += 16) {
    const Float8 y0 = simd::activate<K, Float8, Int8>(a, in(i)),
                 y1 = simd::activate<K, Float8, Int8>(a, in(i + 8));
    store8(row + i, y0);
    store8(row + i + 8, y1);
  }
  for (; i + 8 <= n; i += 8) store8(row + i, simd::activate<K, Float8, Int8>(a, in(i)));
  for (; i < n; ++i) {
    const float b = kBiasPerElement ? (bias ? bias[i] : 0.0f) : rowBias[0];
    row[i] = simd::activate<K, float, int32_t>(a, row[i] + b + (residual ? residual[i] : 0.0f));
  }
}

template <bool kBiasPerElement>
void dispatchEpilogue(const Activation& act, float* row, int64_t n, const float* bias,
                      const float* residual) {
  if (act.kind == ActivationKind::kNone && !bias && !residual) return;
  if (activeCpuIsa() >= CpuIsa::kAvx512)
    return detail::applyEpilogueAvx512(act, row, n, bias, kBiasPerElement, residual);
  simd::withActivationKind(act.kind, [&](auto kind) {
    epilogueLoop<decltype(kind)::value, kBiasPerElement>(act, row, n, bias, residual);
  });
}

template <ActivationKind K>
void activationLoop(const Activation& a, const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const Float8 y0 = simd::activate<K, Float8, Int8>(a, load8(x + i));
    const Float8 y1 = simd::activate<K, Float8, Int8>(a, load8(x + i + 8));
    store8(y + i, y0);
    store8(y + i + 8, y1);
  }
  for (; i + 8 <= n; i += 8) store8(y + i, simd::activate<K, Float8, Int8>(a, load8(x + i)));
  for (; i < n; ++i) y[i] = simd::activate<K, float, int32_t>(a, x[i]);
}

}  // namespace

void applyActivation(const Activation& act, const float* x, float* y, int64_t n) {
  if (activeCpuIsa() >= CpuIsa::kAvx512) return detail::applyActivationAvx512(act, x, y, n);
  simd::withActivationKind(act.kind,
                           [&](auto kind) { activationLoop<decltype(kind)::value>(act, x, y, n); });
}

void applyActivationInParallel(const Activation& act, const float* x, float* y, int64_t n) {
  parallelForAtLeast(n, kMinElementsPerThread, [&](int64_t begin, int64_t end) {
    applyActivation(act, x + begin, y + begin, end - begin);
  });
}

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
    case ActivationKind::kNone:
      return "";
    case ActivationKind::kRelu:
      return "Relu";
    case ActivationKind::kClip:
      return "Clip";
    case ActivationKind::kLeakyRelu:
      return "LeakyRelu";
    case ActivationKind::kSigmoid:
      return "Sigmoid";
    case ActivationKind::kHardSigmoid:
      return "HardSigmoid";
    case ActivationKind::kHardSwish:
      return "HardSwish";
    case ActivationKind::kSiLU:
      return "SiLU";
    case ActivationKind::kGelu:
      return "Gelu";
  }
  return "";
}

Activation fusedActivationOf(const ir::Node& node) {
  const std::string name = ir::attrString(node, "activation", "");
  const std::optional<ActivationKind> kind = activationKindFromName(name);
  if (!kind)
    ir::failNode(node, "unknown fused activation '" + name + "'", ErrorCode::kUnsupportedNode);
  const std::vector<float> params = ir::attrFloats(node, "activation_params", {});
  return Activation{*kind, params.size() > 0 ? params[0] : 0.0f,
                    params.size() > 1 ? params[1] : 0.0f};
}

void applyEpilogue(const Activation& act, float* row, int64_t n, float bias,
                   const float* residual) {
  dispatchEpilogue<false>(act, row, n, bias == 0.0f ? nullptr : &bias, residual);
}

void applyEpilogueWithBiasRow(const Activation& act, float* row, int64_t n, const float* bias,
                              const float* residual) {
  dispatchEpilogue<true>(act, row, n, bias, residual);
}

}  // namespace kiln::cpu
