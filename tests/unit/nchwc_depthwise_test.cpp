// Depthwise kiln::NchwcConv (backends/cpu/kernels/nchwc_conv_depthwise_avx512.cpp and the AVX2
// path) against a direct loop in double over NCHW tensors. The shapes aim at the kernel's cases:
// the fixed 3x3 / 5x5 / 7x7 path with strides 1 and 2 (interior chunks of 8, 4, 2 and 1 outputs,
// border columns and rows, maps narrower than the kernel, row bands split over two threads),
// asymmetric and large pads, vertical strides other than the horizontal one, and the general path
// (dilation, non-square kernels, stride 3); channel counts that are not multiples of 16, with
// NaN in X's and Z's padding channels, which must not reach any output; residuals and the fused
// activations; 1 and 2 threads on AVX-512 and AVX2.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "activation_reference.h"
#include "backends/cpu/activation.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels/nchwc_conv.h"
#include "nchwc_test_layout.h"
#include "random_data.h"
#include "scoped_threads.h"

namespace kiln::cpu {
namespace {

using kiln::testing::randomFloats;
using kiln::testing::toBlocked;
using testing::activationReference;

constexpr int64_t kB = 16;

struct DepthwiseCase {
  std::string name;
  int64_t n, c, h, w;
  int64_t kh, kw, sh, sw;
  int64_t padTop, padLeft, padBottom, padRight;
  int64_t dh = 1, dw = 1;

  int64_t outH() const { return (h + padTop + padBottom - dh * (kh - 1) - 1) / sh + 1; }
  int64_t outW() const { return (w + padLeft + padRight - dw * (kw - 1) - 1) / sw + 1; }
};

// Square kernel k, stride s, "same" padding k / 2 on every side.
DepthwiseCase square(int64_t c, int64_t h, int64_t w, int64_t k, int64_t s) {
  return DepthwiseCase{std::to_string(c) + "ch " + std::to_string(h) + "x" + std::to_string(w) +
                           " k" + std::to_string(k) + " s" + std::to_string(s),
                       1,
                       c,
                       h,
                       w,
                       k,
                       k,
                       s,
                       s,
                       k / 2,
                       k / 2,
                       k / 2,
                       k / 2};
}

// act(depthwise(x, w) + b + z) in double over NCHW.
std::vector<double> reference(const DepthwiseCase& t, const std::vector<float>& x,
                              const std::vector<float>& w, const std::vector<float>& b,
                              const std::vector<float>* z, const Activation& act) {
  const int64_t oh = t.outH(), ow = t.outW();
  std::vector<double> y(static_cast<size_t>(t.n * t.c * oh * ow));
  for (int64_t i = 0; i < t.n; ++i)
    for (int64_t c = 0; c < t.c; ++c)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double acc = b[c];
          for (int64_t ky = 0; ky < t.kh; ++ky)
            for (int64_t kx = 0; kx < t.kw; ++kx) {
              const int64_t iy = oy * t.sh - t.padTop + ky * t.dh,
                            ix = ox * t.sw - t.padLeft + kx * t.dw;
              if (iy < 0 || iy >= t.h || ix < 0 || ix >= t.w) continue;
              acc +=
                  double(x[((i * t.c + c) * t.h + iy) * t.w + ix]) * w[(c * t.kh + ky) * t.kw + kx];
            }
          const size_t at = static_cast<size_t>(((i * t.c + c) * oh + oy) * ow + ox);
          if (z) acc += (*z)[at];
          y[at] = activationReference(act, acc);
        }
  return y;
}

void checkCase(const DepthwiseCase& t, const Activation& act, bool withResidual) {
  SCOPED_TRACE(t.name + (withResidual ? " +residual" : "") + " act " + activationName(act.kind));
  NchwcConvShape s;
  s.batch = t.n;
  s.inChannels = s.outChannels = t.c;
  s.height = t.h;
  s.width = t.w;
  s.outHeight = t.outH();
  s.outWidth = t.outW();
  s.kernelH = t.kh;
  s.kernelW = t.kw;
  s.strideH = t.sh;
  s.strideW = t.sw;
  s.dilationH = t.dh;
  s.dilationW = t.dw;
  s.padTop = t.padTop;
  s.padLeft = t.padLeft;
  s.depthwise = true;
  ASSERT_GT(s.outHeight, 0);
  ASSERT_GT(s.outWidth, 0);
  const int64_t outPlane = s.outHeight * s.outWidth, blocks = s.outBlocks();
  const std::vector<float> x = randomFloats(t.n * t.c * t.h * t.w, 11);
  const std::vector<float> w = randomFloats(t.c * t.kh * t.kw, 12);
  const std::vector<float> b = randomFloats(t.c, 13);
  const std::vector<float> z = randomFloats(t.n * t.c * outPlane, 14);
  const std::vector<float>* zp = withResidual ? &z : nullptr;

  const NchwcPackedWeights packed =
      packNchwcWeights(w.data(), t.c, 1, t.kh, t.kw, NchwcWeightLayout::kDepthwise);
  const std::vector<float> xBlocked = toBlocked(x, t.n, t.c, t.h * t.w);
  const std::vector<float> zBlocked = toBlocked(z, t.n, t.c, outPlane);
  std::vector<float> bias(static_cast<size_t>(blocks * kB), 0.0f);
  std::copy(b.begin(), b.end(), bias.begin());
  std::vector<float> y(static_cast<size_t>(t.n * blocks * outPlane * kB), 12345.0f);
  NchwcConvArgs args;
  args.shape = &s;
  args.x = xBlocked.data();
  args.weights = packed.data.get();
  args.bias = bias.data();
  args.residual = withResidual ? zBlocked.data() : nullptr;
  args.act = act;
  args.y = y.data();
  nchwcConv(args);

  const std::vector<double> expected = reference(t, x, w, b, zp, act);
  const double tolerance = 1e-5 * std::sqrt(double(t.kh * t.kw));
  for (int64_t i = 0; i < t.n; ++i)
    for (int64_t c = 0; c < blocks * kB; ++c)
      for (int64_t p = 0; p < outPlane; ++p) {
        const float got =
            y[static_cast<size_t>(((i * blocks + c / kB) * outPlane + p) * kB + c % kB)];
        if (c >= t.c) {  // a padding channel: anything finite (X's and Z's are NaN)
          ASSERT_TRUE(std::isfinite(got))
              << "padding channel " << c << " pixel " << p << " is " << got;
          continue;
        }
        const double want = expected[static_cast<size_t>((i * t.c + c) * outPlane + p)];
        ASSERT_NEAR(got, want, tolerance * (1.0 + std::fabs(want)))
            << "image " << i << " channel " << c << " output row " << p / s.outWidth << " column "
            << p % s.outWidth;
      }
}

std::vector<DepthwiseCase> shapeCases() {
  std::vector<DepthwiseCase> c;
  // The fixed path: every square kernel and stride, on widths that exercise each interior chunk
  // size (8, 4, 2, 1) and maps as narrow as the kernel or narrower.
  for (int64_t k : {3, 5, 7}) {
    for (int64_t s : {1, 2}) {
      for (int64_t width : {1, 2, 5, 7, 14, 23, 31}) c.push_back(square(24, 9, width, k, s));
    }
  }
  // MobileNetV2 / EfficientNet layer shapes (shrunk in channels), channel counts off 16.
  c.push_back(square(32, 112, 112, 3, 1));
  c.push_back(square(40, 56, 56, 3, 2));
  c.push_back(square(8, 28, 28, 5, 1));
  c.push_back(square(144, 14, 14, 5, 2));
  c.push_back(square(100, 7, 7, 3, 1));
  c.push_back(square(72, 7, 7, 5, 1));
  DepthwiseCase batch = square(20, 10, 11, 3, 2);
  batch.name = "batch 3";
  batch.n = 3;
  c.push_back(batch);
  // Asymmetric, zero and large pads on the fixed path.
  c.push_back(DepthwiseCase{"3x3 s2 pads 0,0,1,1 (TF same)", 2, 40, 10, 9, 3, 3, 2, 2, 0, 0, 1, 1});
  c.push_back(DepthwiseCase{"3x3 s1 no padding", 1, 24, 8, 12, 3, 3, 1, 1, 0, 0, 0, 0});
  c.push_back(DepthwiseCase{"5x5 s1 pads 2,0,1,3", 1, 24, 9, 13, 5, 5, 1, 1, 2, 0, 1, 3});
  c.push_back(
      DepthwiseCase{"3x3 s1 pads 3 (beyond the kernel)", 1, 17, 6, 7, 3, 3, 1, 1, 3, 3, 3, 3});
  c.push_back(DepthwiseCase{"7x7 s2 pads 1,4,5,0", 1, 33, 12, 15, 7, 7, 2, 2, 1, 4, 5, 0});
  // Vertical stride other than the horizontal one (the fixed path takes any vertical stride).
  c.push_back(DepthwiseCase{"3x3 strides 3,1", 1, 24, 13, 12, 3, 3, 3, 1, 1, 1, 1, 1});
  c.push_back(DepthwiseCase{"5x5 strides 1,2", 1, 24, 9, 17, 5, 5, 1, 2, 2, 2, 2, 2});
  // The general path.
  DepthwiseCase dil = square(24, 13, 15, 3, 1);
  dil.name = "3x3 dilation 2";
  dil.dh = dil.dw = 2;
  dil.padTop = dil.padLeft = dil.padBottom = dil.padRight = 2;
  c.push_back(dil);
  DepthwiseCase dilRect{"3x3 dilations 1,3", 1, 20, 11, 16, 3, 3, 1, 1, 1, 3, 1, 3};
  dilRect.dw = 3;
  c.push_back(dilRect);
  c.push_back(DepthwiseCase{"4x3 kernel stride 3", 1, 20, 13, 14, 4, 3, 3, 3, 1, 1, 2, 1});
  c.push_back(DepthwiseCase{"3x5 kernel stride 1,2", 1, 24, 9, 12, 3, 5, 1, 2, 1, 2, 1, 2});
  c.push_back(DepthwiseCase{"3x3 stride 3", 1, 24, 10, 17, 3, 3, 3, 3, 1, 1, 1, 1});
  return c;
}

class NchwcDepthwise : public ::testing::TestWithParam<std::tuple<CpuIsa, int>> {};

TEST_P(NchwcDepthwise, MatchesDirectLoop) {
  const auto [isa, threads] = GetParam();
  if (isa > detectedCpuIsa()) GTEST_SKIP() << "the CPU lacks " << cpuIsaName(isa);
  ScopedCpuIsaLimit limit(isa);
  kiln::testing::ScopedThreads scopedThreads(threads);
  for (const DepthwiseCase& t : shapeCases()) {
    for (bool withResidual : {false, true}) checkCase(t, Activation{}, withResidual);
  }
}

TEST_P(NchwcDepthwise, FusedActivations) {
  const auto [isa, threads] = GetParam();
  if (isa > detectedCpuIsa()) GTEST_SKIP() << "the CPU lacks " << cpuIsaName(isa);
  ScopedCpuIsaLimit limit(isa);
  kiln::testing::ScopedThreads scopedThreads(threads);
  const std::vector<DepthwiseCase> cases{
      square(40, 9, 11, 3, 1), square(24, 8, 13, 5, 2),
      DepthwiseCase{"3x3 dilation 1, stride 3", 1, 20, 7, 10, 3, 3, 3, 3, 1, 1, 1, 1}};
  const std::vector<Activation> acts{
      {ActivationKind::kRelu, 0, 0},         {ActivationKind::kClip, 0.0f, 0.6f},
      {ActivationKind::kLeakyRelu, 0.1f, 0}, {ActivationKind::kSigmoid, 0, 0},
      {ActivationKind::kHardSwish, 0, 0},    {ActivationKind::kSiLU, 0, 0}};
  for (const DepthwiseCase& t : cases) {
    for (const Activation& act : acts) {
      for (bool withResidual : {false, true}) checkCase(t, act, withResidual);
    }
  }
}

// One channel plane and many rows: with two threads the plane is cut into bands of rows.
TEST_P(NchwcDepthwise, OnePlaneSplitIntoRowBands) {
  const auto [isa, threads] = GetParam();
  if (isa > detectedCpuIsa()) GTEST_SKIP() << "the CPU lacks " << cpuIsaName(isa);
  ScopedCpuIsaLimit limit(isa);
  kiln::testing::ScopedThreads scopedThreads(threads);
  for (int64_t k : {3, 5}) {
    for (int64_t s : {1, 2})
      checkCase(square(9, 37, 20, k, s), Activation{ActivationKind::kClip, 0.0f, 6.0f}, true);
  }
}

INSTANTIATE_TEST_SUITE_P(IsaAndThreads, NchwcDepthwise,
                         ::testing::Combine(::testing::Values(CpuIsa::kAvx2, CpuIsa::kAvx512),
                                            ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return std::string(cpuIsaName(std::get<0>(info.param))) + "_threads" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace kiln::cpu
