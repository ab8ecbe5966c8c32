// The direct few-output convolution (backends/cpu/kernels/conv_few_outputs.h) against a loop in
// double: 1 to 16 output channels (one to four channel groups), 1, 3 and 32 input channels,
// kernels 1x1 to 9x9 and rectangular ones, asymmetric padding, widths that straddle vectors and
// blocks, batch 2, bias, residual and every fused activation, serially and on two threads, on
// the AVX2 and AVX-512 paths. Then the rule (stride 1, no dilation, few channels, group 1), and
// a Conv node run through a Session on both ISAs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "activation_reference.h"
#include "backends/cpu/activation.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels/conv_few_outputs.h"
#include "random_data.h"
#include "scoped_threads.h"
#include "single_node_model.h"

namespace kiln::cpu {
namespace {

using kiln::testing::randomFloats;
using testing::activationReference;

struct FewCase {
  int64_t co, ci, kh, kw, n, h, w, padTop, padLeft, padBottom, padRight;
};

ir::ConvGeometry geometryOf(const FewCase& t) {
  ir::ConvGeometry g;
  g.kernel = {t.kh, t.kw};
  g.strides = {1, 1};
  g.dilations = {1, 1};
  g.padsBegin = {t.padTop, t.padLeft};
  g.padsEnd = {t.padBottom, t.padRight};
  g.outputPadding = {0, 0};
  g.output = {t.h + t.padTop + t.padBottom - t.kh + 1, t.w + t.padLeft + t.padRight - t.kw + 1};
  return g;
}

std::vector<float> reference(const FewCase& t, const ir::ConvGeometry& g,
                             const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>* b, const std::vector<float>* residual,
                             const Activation& act) {
  const int64_t oh = g.output[0], ow = g.output[1];
  std::vector<float> y(static_cast<size_t>(t.n * t.co * oh * ow));
  for (int64_t img = 0; img < t.n; ++img) {
    for (int64_t co = 0; co < t.co; ++co) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          double acc = b ? (*b)[co] : 0.0;
          for (int64_t ci = 0; ci < t.ci; ++ci) {
            for (int64_t ky = 0; ky < t.kh; ++ky) {
              for (int64_t kx = 0; kx < t.kw; ++kx) {
                const int64_t iy = oy - t.padTop + ky, ix = ox - t.padLeft + kx;
                if (iy < 0 || iy >= t.h || ix < 0 || ix >= t.w) continue;
                acc += double(x[((img * t.ci + ci) * t.h + iy) * t.w + ix]) *
                       w[((co * t.ci + ci) * t.kh + ky) * t.kw + kx];
              }
            }
          }
          const size_t o = static_cast<size_t>(((img * t.co + co) * oh + oy) * ow + ox);
          if (residual) acc += (*residual)[o];
          y[o] = static_cast<float>(activationReference(act, acc));
        }
      }
    }
  }
  return y;
}

std::string describe(const FewCase& t) {
  return "co=" + std::to_string(t.co) + " ci=" + std::to_string(t.ci) +
         " k=" + std::to_string(t.kh) + "x" + std::to_string(t.kw) + " n=" + std::to_string(t.n) +
         " " + std::to_string(t.h) + "x" + std::to_string(t.w) + " pads " +
         std::to_string(t.padTop) + "," + std::to_string(t.padLeft) + "," +
         std::to_string(t.padBottom) + "," + std::to_string(t.padRight);
}

// Runs every case with and without bias and residual and compares with the double loop.
void checkCases(CpuIsa isa, const std::vector<FewCase>& cases, const Activation& act, int threads) {
  ScopedCpuIsaLimit limit(isa);
  kiln::testing::ScopedThreads scopedThreads(threads);
  for (const FewCase& t : cases) {
    const ir::ConvGeometry g = geometryOf(t);
    ASSERT_TRUE(fewOutputConvPreferred(g, 1, t.ci, t.co)) << describe(t);
    const int64_t outNumel = t.n * t.co * g.output[0] * g.output[1];
    const std::vector<float> x = randomFloats(t.n * t.ci * t.h * t.w, 1);
    const std::vector<float> w = randomFloats(t.co * t.ci * t.kh * t.kw, 2),
                             b = randomFloats(t.co, 3);
    const std::vector<float> residual = randomFloats(outNumel, 4);
    const FewOutputWeights packed = packFewOutputWeights(w.data(), t.co, t.ci, t.kh, t.kw);
    for (bool withExtras : {false, true}) {
      SCOPED_TRACE(describe(t) + (withExtras ? " +bias +residual" : "") + " act " +
                   activationName(act.kind) + " isa " + cpuIsaName(isa) + " threads " +
                   std::to_string(threads));
      std::vector<float> y(static_cast<size_t>(outNumel), -7.0f);
      fewOutputConv2d(g, t.n, t.h, t.w, x.data(), packed, withExtras ? b.data() : nullptr,
                      withExtras ? residual.data() : nullptr, act, y.data());
      const std::vector<float> expected =
          reference(t, g, x, w, withExtras ? &b : nullptr, withExtras ? &residual : nullptr, act);
      // Sums of up to 32 * 81 products of values in [-1, 1].
      const float tolerance = 1e-6f * float(t.ci * t.kh * t.kw) + 2e-5f;
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_NEAR(y[i], expected[i], tolerance * (1.0f + std::fabs(expected[i]))) << "at " << i;
      }
    }
  }
}

// The ISAs this CPU can run, AVX2 first.
std::vector<CpuIsa> isas() {
  std::vector<CpuIsa> result{CpuIsa::kAvx2};
  if (detectedCpuIsa() >= CpuIsa::kAvx512) result.push_back(CpuIsa::kAvx512);
  return result;
}

const std::vector<FewCase>& shapeCases() {
  // co, ci, kh, kw, n, h, w, pads top, left, bottom, right
  static const std::vector<FewCase> cases{
      {3, 32, 5, 5, 1, 9, 768, 2, 2, 2, 2},
      {1, 1, 1, 1, 1, 3, 7, 0, 0, 0, 0},
      {2, 3, 3, 3, 2, 6, 17, 1, 1, 1, 1},
      {3, 3, 3, 3, 1, 5, 33, 1, 0, 2, 1},
      {4, 32, 3, 3, 2, 5, 17, 1, 1, 1, 1},
      {1, 32, 9, 9, 1, 12, 33, 4, 4, 4, 4},
      {2, 1, 9, 9, 1, 10, 7, 4, 4, 4, 4},
      {3, 32, 1, 1, 2, 4, 33, 0, 0, 0, 0},
      {4, 3, 5, 5, 1, 7, 7, 2, 2, 2, 2},
      {5, 3, 3, 3, 1, 6, 21, 1, 1, 1, 1},
      {6, 32, 5, 5, 1, 6, 17, 2, 2, 2, 2},
      {7, 3, 1, 3, 2, 5, 50, 0, 1, 0, 1},
      {8, 3, 3, 3, 2, 5, 300, 1, 1, 1, 1},
      {3, 3, 5, 5, 1, 4, 7, 0, 3, 1, 0},
      {1, 3, 3, 5, 1, 5, 260, 0, 2, 2, 2},
      {2, 3, 11, 11, 1, 13, 40, 5, 5, 5, 5},
      {3, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {4, 3, 3, 3, 1, 3, 400, 1, 1, 1, 1},
      {16, 3, 3, 3, 1, 5, 40, 1, 1, 1, 1},
      {13, 8, 5, 5, 2, 6, 23, 2, 2, 2, 2},
      {4, 1, 1, 1, 1, 2, 20, 0, 0, 0, 0},
      // Pads wider than a vector and taller than the kernel: whole output rows and vectors of
      // padding.
      {2, 3, 3, 3, 1, 4, 10, 4, 20, 1, 18},
  };
  return cases;
}

TEST(FewOutputConv, MatchesDirectLoopOnEachIsa) {
  for (CpuIsa isa : isas()) checkCases(isa, shapeCases(), Activation{}, 1);
}

TEST(FewOutputConv, FusedActivationsOnEachIsa) {
  const std::vector<FewCase> cases{{3, 3, 5, 5, 2, 6, 20, 2, 2, 2, 2},
                                   {4, 32, 3, 3, 1, 4, 33, 1, 1, 1, 1}};
  const std::vector<Activation> acts{{ActivationKind::kRelu, 0, 0},
                                     {ActivationKind::kClip, 0.0f, 0.6f},
                                     {ActivationKind::kLeakyRelu, 0.1f, 0},
                                     {ActivationKind::kSigmoid, 0, 0},
                                     {ActivationKind::kHardSigmoid, 0.2f, 0.5f},
                                     {ActivationKind::kHardSwish, 0, 0},
                                     {ActivationKind::kSiLU, 0, 0},
                                     {ActivationKind::kGelu, 0, 0}};
  for (CpuIsa isa : isas()) {
    for (const Activation& act : acts) checkCases(isa, cases, act, 1);
  }
}

TEST(FewOutputConv, TwoThreadsMatch) {
  for (CpuIsa isa : isas())
    checkCases(isa, shapeCases(), Activation{ActivationKind::kRelu, 0, 0}, 2);
}

TEST(FewOutputConv, ChannelGroupsAreBalanced) {
  const auto sizes = [](int64_t co) {
    std::vector<int64_t> s;
    int64_t next = 0;
    for (const auto& grp : detail::fewOutputGroups(co)) {
      EXPECT_EQ(grp.first, next);
      next += grp.count;
      s.push_back(grp.count);
    }
    EXPECT_EQ(next, co);
    return s;
  };
  EXPECT_EQ(sizes(3), (std::vector<int64_t>{3}));
  EXPECT_EQ(sizes(5), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(sizes(7), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(sizes(8), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(sizes(9), (std::vector<int64_t>{3, 3, 3}));
}

TEST(FewOutputConv, RuleTakesOnlyStrideOneFewChannels) {
  ir::ConvGeometry g = geometryOf({3, 32, 5, 5, 1, 16, 16, 2, 2, 2, 2});
  EXPECT_TRUE(fewOutputConvPreferred(g, 1, 32, 3));
  EXPECT_TRUE(fewOutputConvPreferred(g, 1, 32, 16));
  EXPECT_FALSE(
      fewOutputConvPreferred(g, 1, 32, 17));  // many channels: im2col + GEMM (or blocked layout)
  const ir::ConvGeometry pointwise = geometryOf({4, 32, 1, 1, 1, 16, 16, 0, 0, 0, 0});
  EXPECT_TRUE(fewOutputConvPreferred(pointwise, 1, 32, 4));
  EXPECT_FALSE(fewOutputConvPreferred(pointwise, 1, 32, 8));  // a plain GEMM (no im2col) is faster
  EXPECT_FALSE(fewOutputConvPreferred(g, 2, 32, 4));          // grouped
  ir::ConvGeometry strided = g;
  strided.strides = {2, 2};
  EXPECT_FALSE(fewOutputConvPreferred(strided, 1, 32, 3));
  ir::ConvGeometry dilated = g;
  dilated.dilations = {2, 2};
  EXPECT_FALSE(fewOutputConvPreferred(dilated, 1, 32, 3));
  ir::ConvGeometry wide = geometryOf({3, 32, 13, 13, 1, 16, 16, 6, 6, 6, 6});
  EXPECT_FALSE(fewOutputConvPreferred(wide, 1, 32, 3));
}

// A Conv node through a Session (W a graph input, so the kernel packs it per run) on each ISA
// against the double loop: the dispatch in conv.cpp and the Conv attributes' geometry.
TEST(FewOutputConv, ConvNodeMatchesOnEachIsa) {
  const FewCase t{3, 5, 5, 5, 2, 11, 37, 2, 1, 2, 3};
  const ir::ConvGeometry g = geometryOf(t);
  const std::vector<float> x = randomFloats(t.n * t.ci * t.h * t.w, 5);
  const std::vector<float> w = randomFloats(t.co * t.ci * t.kh * t.kw, 6),
                           b = randomFloats(t.co, 7);
  const std::vector<float> expected = reference(t, g, x, w, &b, nullptr, Activation{});
  for (CpuIsa isa : isas()) {
    SCOPED_TRACE(cpuIsaName(isa));
    ScopedCpuIsaLimit limit(isa);
    kiln::testing::SingleNodeModel model("Conv", 13);
    model.input("x", Tensor::fromVector(DataType::kFloat32, {t.n, t.ci, t.h, t.w}, x))
        .input("w", Tensor::fromVector(DataType::kFloat32, {t.co, t.ci, t.kh, t.kw}, w))
        .input("b", Tensor::fromVector(DataType::kFloat32, {t.co}, b))
        .output("y")
        .attr("kernel_shape", std::vector<int64_t>{t.kh, t.kw})
        .attr("pads", std::vector<int64_t>{t.padTop, t.padLeft, t.padBottom, t.padRight});
    const auto outputs = model.run();
    ASSERT_EQ(outputs.size(), 1u);
    const Tensor& y = outputs[0].second;
    ASSERT_EQ(y.shape(), (Shape{t.n, t.co, g.output[0], g.output[1]}));
    const std::vector<float> got = kiln::testing::valuesOf<float>(y);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], expected[i], 1e-4f * (1.0f + std::fabs(expected[i]))) << i;
  }
}

}  // namespace
}  // namespace kiln::cpu
