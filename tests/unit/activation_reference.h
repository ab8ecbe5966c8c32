// Each fused activation kind (backends/cpu/activation.h) as a double-precision formula, the
// reference the kernel tests compare against.
#pragma once
#include <algorithm>
#include <cmath>

#include "backends/cpu/activation.h"

namespace kiln::cpu::testing {

inline double activationReference(const Activation& a, double v) {
  switch (a.kind) {
    case ActivationKind::kNone:
      return v;
    case ActivationKind::kRelu:
      return v > 0 ? v : 0;
    case ActivationKind::kClip:
      return std::min<double>(std::max<double>(v, a.alpha), a.beta);
    case ActivationKind::kLeakyRelu:
      return v < 0 ? v * a.alpha : v;
    case ActivationKind::kSigmoid:
      return 1 / (1 + std::exp(-v));
    case ActivationKind::kHardSigmoid:
      return std::min(std::max(v * a.alpha + a.beta, 0.0), 1.0);
    case ActivationKind::kHardSwish:
      return v * std::min(std::max(v / 6 + 0.5, 0.0), 1.0);
    case ActivationKind::kSiLU:
      return v / (1 + std::exp(-v));
    case ActivationKind::kGelu:
      return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  }
  return v;
}

}  // namespace kiln::cpu::testing
