// The fused-activation epilogues (backends/cpu/activation.h) on the AVX2 and AVX-512 paths
// against double-precision formulas: row lengths around the vector widths (tails), a bias per
// row or per element, with and without a residual, every activation kind.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "activation_reference.h"
#include "backends/cpu/activation.h"
#include "backends/cpu/cpu_isa.h"

namespace kiln::cpu {
namespace {

using testing::activationReference;

TEST(ActivationEpilogue, MatchesFormulasOnEachIsa) {
  const std::vector<Activation> acts{
      {ActivationKind::kNone, 0, 0},       {ActivationKind::kRelu, 0, 0},
      {ActivationKind::kClip, 0.0f, 6.0f}, {ActivationKind::kLeakyRelu, 0.1f, 0},
      {ActivationKind::kSigmoid, 0, 0},    {ActivationKind::kHardSigmoid, 0.2f, 0.5f},
      {ActivationKind::kHardSwish, 0, 0},  {ActivationKind::kSiLU, 0, 0},
      {ActivationKind::kGelu, 0, 0}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-8.0f, 8.0f);
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (isa > detectedCpuIsa()) continue;
    ScopedCpuIsaLimit limit(isa);
    for (const Activation& act : acts) {
      for (int64_t n : {1, 7, 8, 15, 16, 17, 33, 100}) {
        for (bool perElement : {false, true}) {
          for (bool withResidual : {false, true}) {
            SCOPED_TRACE(std::string(cpuIsaName(isa)) + " " + activationName(act.kind) +
                         " n=" + std::to_string(n) + (perElement ? " bias row" : " bias scalar") +
                         (withResidual ? " +residual" : ""));
            std::vector<float> row(static_cast<size_t>(n)), bias(static_cast<size_t>(n)),
                residual(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i)
              row[i] = dist(rng), bias[i] = dist(rng), residual[i] = dist(rng);
            std::vector<float> y = row;
            if (perElement)
              applyEpilogueWithBiasRow(act, y.data(), n, bias.data(),
                                       withResidual ? residual.data() : nullptr);
            else
              applyEpilogue(act, y.data(), n, bias[0], withResidual ? residual.data() : nullptr);
            for (int64_t i = 0; i < n; ++i) {
              const double v = double(row[i]) + (perElement ? bias[i] : bias[0]) +
                               (withResidual ? residual[i] : 0.0);
              const double e = activationReference(act, v);
              ASSERT_NEAR(y[i], e, 2e-6 * (1 + std::fabs(e))) << "at " << i;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln::cpu
