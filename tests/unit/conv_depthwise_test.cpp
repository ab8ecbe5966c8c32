// The depthwise K x K kernel (backends/cpu/kernels/conv_depthwise.h) on its AVX2 and AVX-512
// paths, against a direct loop in double: odd and vector-straddling widths, asymmetric padding,
// strides 1 and 2, batch > 1, channel counts that are not multiples of 16, bias, residual and
// every fused activation, serially and on a two-thread pool.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "activation_reference.h"
#include "backends/cpu/activation.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels/conv_depthwise.h"
#include "random_data.h"
#include "scoped_threads.h"

namespace kiln::cpu {
namespace {

using kiln::testing::randomFloats;
using testing::activationReference;

struct DwCase {
  int64_t k, s, n, c, h, w, padTop, padLeft, padBottom, padRight;
};

ir::ConvGeometry geometryOf(const DwCase& t) {
  ir::ConvGeometry g;
  g.kernel = {t.k, t.k};
  g.strides = {t.s, t.s};
  g.dilations = {1, 1};
  g.padsBegin = {t.padTop, t.padLeft};
  g.padsEnd = {t.padBottom, t.padRight};
  g.outputPadding = {0, 0};
  g.output = {(t.h + t.padTop + t.padBottom - t.k) / t.s + 1,
              (t.w + t.padLeft + t.padRight - t.k) / t.s + 1};
  return g;
}

std::vector<float> reference(const DwCase& t, const ir::ConvGeometry& g,
                             const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>& b, const std::vector<float>* residual,
                             const Activation& act) {
  const int64_t oh = g.output[0], ow = g.output[1];
  std::vector<float> y(static_cast<size_t>(t.n * t.c * oh * ow));
  for (int64_t img = 0; img < t.n * t.c; ++img) {
    const int64_t ch = img % t.c;
    for (int64_t oy = 0; oy < oh; ++oy) {
      for (int64_t ox = 0; ox < ow; ++ox) {
        double acc = b[ch];
        for (int64_t ky = 0; ky < t.k; ++ky) {
          for (int64_t kx = 0; kx < t.k; ++kx) {
            const int64_t iy = oy * t.s - t.padTop + ky, ix = ox * t.s - t.padLeft + kx;
            if (iy < 0 || iy >= t.h || ix < 0 || ix >= t.w) continue;
            acc += double(x[(img * t.h + iy) * t.w + ix]) * w[(ch * t.k + ky) * t.k + kx];
          }
        }
        const size_t o = static_cast<size_t>((img * oh + oy) * ow + ox);
        if (residual) acc += (*residual)[o];
        y[o] = static_cast<float>(activationReference(act, acc));
      }
    }
  }
  return y;
}

std::string describe(const DwCase& t) {
  return "k=" + std::to_string(t.k) + " s=" + std::to_string(t.s) + " n=" + std::to_string(t.n) +
         " c=" + std::to_string(t.c) + " " + std::to_string(t.h) + "x" + std::to_string(t.w) +
         " pads " + std::to_string(t.padTop) + "," + std::to_string(t.padLeft) + "," +
         std::to_string(t.padBottom) + "," + std::to_string(t.padRight);
}

// Runs every case on the ISA limited to `isa`, with and without a residual, and compares.
void checkCases(CpuIsa isa, const std::vector<DwCase>& cases, const Activation& act, int threads) {
  ScopedCpuIsaLimit limit(isa);
  kiln::testing::ScopedThreads scopedThreads(threads);
  for (const DwCase& t : cases) {
    const ir::ConvGeometry g = geometryOf(t);
    ASSERT_TRUE(depthwiseConv2dSupported(g)) << describe(t);
    const int64_t outNumel = t.n * t.c * g.output[0] * g.output[1];
    const std::vector<float> x = randomFloats(t.n * t.c * t.h * t.w, 1);
    const std::vector<float> w = randomFloats(t.c * t.k * t.k, 2), b = randomFloats(t.c, 3);
    const std::vector<float> residual = randomFloats(outNumel, 4);
    for (bool withResidual : {false, true}) {
      SCOPED_TRACE(describe(t) + (withResidual ? " +residual" : "") + " act " +
                   activationName(act.kind) + " isa " + cpuIsaName(isa) + " threads " +
                   std::to_string(threads));
      std::vector<float> y(static_cast<size_t>(outNumel), -7.0f);
      depthwiseConv2d(g, t.n, t.c, t.h, t.w, x.data(), w.data(), b.data(),
                      withResidual ? residual.data() : nullptr, act, y.data());
      const std::vector<float> expected =
          reference(t, g, x, w, b, withResidual ? &residual : nullptr, act);
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_NEAR(y[i], expected[i], 2e-5f * (1.0f + std::fabs(expected[i]))) << "at " << i;
      }
    }
  }
}

const std::vector<DwCase>& shapeCases() {
  static const std::vector<DwCase> cases{
      {3, 1, 1, 8, 9, 9, 1, 1, 1, 1},   {3, 1, 2, 19, 7, 7, 1, 1, 1, 1},
      {3, 1, 1, 3, 14, 14, 1, 1, 1, 1}, {3, 1, 1, 2, 5, 33, 1, 1, 1, 1},
      {3, 1, 1, 1, 1, 1, 1, 1, 1, 1},   {3, 1, 1, 2, 6, 17, 0, 0, 0, 0},
      {3, 2, 2, 5, 10, 13, 1, 1, 1, 1}, {3, 2, 1, 17, 14, 14, 0, 0, 1, 1},
      {3, 2, 1, 4, 6, 7, 0, 0, 0, 0},   {3, 2, 1, 2, 35, 35, 1, 1, 1, 1},
      {3, 2, 1, 2, 9, 40, 2, 1, 0, 2},  {5, 1, 1, 6, 11, 17, 2, 2, 2, 2},
      {5, 1, 1, 18, 7, 7, 2, 2, 2, 2},  {5, 1, 1, 2, 14, 14, 2, 2, 2, 2},
      {5, 2, 1, 3, 15, 8, 2, 2, 2, 2},  {5, 2, 3, 2, 14, 14, 1, 1, 2, 2},
      {5, 2, 1, 2, 28, 29, 2, 2, 2, 2}, {7, 1, 1, 2, 7, 23, 3, 3, 3, 3},
      {7, 2, 1, 3, 16, 16, 3, 3, 3, 3}, {3, 1, 1, 2, 20, 50, 1, 0, 2, 1},
      {5, 2, 1, 2, 5, 5, 0, 0, 0, 0},
  };
  return cases;
}

TEST(DepthwiseConvKernel, MatchesDirectLoopOnEachIsa) {
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (isa > detectedCpuIsa()) continue;
    checkCases(isa, shapeCases(), Activation{}, 1);
  }
}

TEST(DepthwiseConvKernel, FusedActivationsOnEachIsa) {
  const std::vector<DwCase> cases{{3, 1, 1, 3, 7, 7, 1, 1, 1, 1},
                                  {3, 2, 1, 3, 12, 21, 1, 1, 1, 1},
                                  {5, 1, 2, 17, 9, 18, 2, 2, 2, 2}};
  const std::vector<Activation> acts{{ActivationKind::kRelu, 0, 0},
                                     {ActivationKind::kClip, 0.0f, 0.6f},
                                     {ActivationKind::kLeakyRelu, 0.1f, 0},
                                     {ActivationKind::kSigmoid, 0, 0},
                                     {ActivationKind::kHardSigmoid, 0.2f, 0.5f},
                                     {ActivationKind::kHardSwish, 0, 0},
                                     {ActivationKind::kSiLU, 0, 0},
                                     {ActivationKind::kGelu, 0, 0}};
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (isa > detectedCpuIsa()) continue;
    for (const Activation& act : acts) checkCases(isa, cases, act, 1);
  }
}

TEST(DepthwiseConvKernel, TwoThreadsMatch) {
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (isa > detectedCpuIsa()) continue;
    checkCases(isa, shapeCases(), Activation{ActivationKind::kClip, 0.0f, 6.0f}, 2);
  }
}

TEST(DepthwiseConvKernel, DilationAndUnequalStridesAreNotClaimed) {
  ir::ConvGeometry g = geometryOf({3, 1, 1, 1, 8, 8, 1, 1, 1, 1});
  g.dilations = {2, 2};
  EXPECT_FALSE(depthwiseConv2dSupported(g));
  g = geometryOf({3, 1, 1, 1, 8, 8, 1, 1, 1, 1});
  g.strides = {1, 2};
  EXPECT_FALSE(depthwiseConv2dSupported(g));
  g = geometryOf({3, 3, 1, 1, 8, 8, 1, 1, 1, 1});
  EXPECT_FALSE(depthwiseConv2dSupported(g));
}

}  // namespace
}  // namespace kiln::cpu
