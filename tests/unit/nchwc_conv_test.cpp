// kiln::NchwcConv (backends/cpu/kernels/nchwc_conv.h) against a direct convolution loop in double
// over NCHW tensors: the test blocks X and Z itself (padding channels filled with NaN, which must
// never reach a real output) and reads Y back. The shapes are those of ResNet-50, MobileNetV2,
// EfficientNet and SRCNN layers (shrunk), plus dilation, asymmetric pads, channel counts that are
// not multiples of 16, batch 2, every fused activation; on the AVX-512 and AVX2 paths, with one
// and two threads; and once end to end through a Session, with its error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/activation.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels/nchwc_conv.h"
#include "backends/cpu/kernels/nchwc_conv_grouped.h"
#include "kiln/session.h"
#include "model_builder.h"
#include "nchwc_conv_reference.h"
#include "nchwc_test_layout.h"
#include "random_data.h"
#include "scoped_threads.h"

namespace kiln::cpu {
namespace {

using kiln::testing::ConvCase;
using kiln::testing::fromBlocked;
using kiln::testing::randomFloats;
using kiln::testing::reference;
using kiln::testing::shapeOf;
using kiln::testing::square;
using kiln::testing::toBlocked;

constexpr int64_t kB = 16;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

ConvCase depthwise(int64_t c, int64_t hw, int64_t k, int64_t s) {
  ConvCase t =
      square("depthwise " + std::to_string(k) + "x" + std::to_string(k) + " s" + std::to_string(s),
             1, c, c, hw, hw, k, s, k / 2);
  t.depthwise = true;
  return t;
}
ConvCase plain(ConvCase t) {
  t.plain = true;
  return t;
}

// Runs the kernel on NCHW data (blocking it as the layout pass would) and returns Y in NCHW;
// fails the test if a padding channel of Y is not finite.
std::vector<float> runKernel(const ConvCase& t, const std::vector<float>& x,
                             const std::vector<float>& w, const std::vector<float>& b,
                             const std::vector<float>* z, const Activation& act) {
  const NchwcConvShape s = shapeOf(t);
  const int64_t outPlane = s.outHeight * s.outWidth;
  const NchwcPackedWeights packed =
      t.group != 1 ? packNchwcGroupedWeights(w.data(), t.co, t.ci, t.group, t.kh, t.kw)
                   : packNchwcWeights(w.data(), t.co, t.inPerGroup(), t.kh, t.kw,
                                      t.depthwise ? NchwcWeightLayout::kDepthwise
                                      : t.plain   ? NchwcWeightLayout::kPlainInput
                                                  : NchwcWeightLayout::kBlockedInput);
  const std::vector<float> xIn = t.plain ? x : toBlocked(x, t.n, t.ci, t.h * t.w);
  std::vector<float> bias(static_cast<size_t>(s.outBlocks() * kB), 0.0f);
  std::copy(b.begin(), b.end(), bias.begin());
  const std::vector<float> zBlocked = z ? toBlocked(*z, t.n, t.co, outPlane) : std::vector<float>{};
  std::vector<float> y(static_cast<size_t>(t.n * s.outBlocks() * outPlane * kB), 12345.0f);
  NchwcConvArgs args;
  args.shape = &s;
  args.x = xIn.data();
  args.weights = packed.data.get();
  args.bias = bias.data();
  args.residual = z ? zBlocked.data() : nullptr;
  args.act = act;
  args.y = y.data();
  nchwcConv(args);
  for (size_t i = 0; i < y.size(); ++i) {
    if (static_cast<int64_t>(i % kB) +
            (static_cast<int64_t>(i) / (outPlane * kB)) % s.outBlocks() * kB >=
        t.co) {
      EXPECT_TRUE(std::isfinite(y[i])) << "padding channel value " << y[i] << " at " << i;
    }
  }
  return fromBlocked(y, t.n, t.co, outPlane);
}

void checkCase(const ConvCase& t, const Activation& act, bool withResidual) {
  SCOPED_TRACE(t.name + (withResidual ? " +residual" : "") + " act " + activationName(act.kind));
  const int64_t outNumel = t.n * t.co * t.outH() * t.outW();
  const std::vector<float> x = randomFloats(t.n * t.ci * t.h * t.w, 1);
  const std::vector<float> w = randomFloats(t.co * t.inPerGroup() * t.kh * t.kw, 2);
  const std::vector<float> b = randomFloats(t.co, 3);
  const std::vector<float> z = randomFloats(outNumel, 4);
  const std::vector<float>* zp = withResidual ? &z : nullptr;
  const std::vector<float> y = runKernel(t, x, w, b, zp, act);
  const std::vector<float> expected = reference(t, x, w, b, zp, act);
  ASSERT_EQ(y.size(), expected.size());
  // Sums of up to a few thousand products of values in [-1, 1]: relative to the sum's scale.
  const float scale = std::sqrt(static_cast<float>(t.inPerGroup() * t.kh * t.kw));
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_NEAR(y[i], expected[i], 1e-4f * (scale + std::fabs(expected[i]))) << "at " << i;
  }
}

const std::vector<ConvCase>& shapeCases() {
  static const std::vector<ConvCase> cases = [] {
    std::vector<ConvCase> c{
        square("resnet bottleneck 1x1", 1, 64, 64, 14, 14, 1, 1, 0),
        square("1x1 256->64 odd width", 1, 256, 64, 7, 13, 1, 1, 0),
        square("3x3 s1 p1", 1, 64, 64, 14, 14, 3, 1, 1),
        square("3x3 s1 p1 width 7", 1, 32, 80, 7, 7, 3, 1, 1),
        square("3x3 s2 p1", 1, 48, 64, 28, 28, 3, 2, 1),
        square("1x1 s2 downsample", 1, 64, 128, 14, 14, 1, 2, 0),
        square("Ci 24 -> Co 40", 1, 24, 40, 13, 13, 3, 1, 1),
        square("Ci 40 -> Co 24 1x1", 1, 40, 24, 7, 7, 1, 1, 0),
        square("Ci 5 -> Co 3", 1, 5, 3, 6, 9, 3, 1, 1),
        square("Co 144: output blocks grouped 3 + 3 + 3", 1, 24, 144, 5, 7, 1, 1, 0),
        square("Co 160: output blocks grouped 3 + 3 + 4", 1, 16, 160, 6, 5, 3, 1, 1),
        square("batch 2", 2, 24, 40, 7, 7, 3, 1, 1),
        plain(square("resnet conv1 7x7 s2 p3 plain", 1, 3, 64, 28, 28, 7, 2, 3)),
        plain(square("srcnn 9x9 p4 plain", 1, 3, 64, 14, 14, 9, 1, 4)),
        plain(square("mobilenet first 3x3 s2 plain", 1, 3, 32, 28, 28, 3, 2, 1)),
        plain(square("plain 3->40 batch 2 width 13", 2, 3, 40, 13, 13, 3, 1, 1)),
        plain(square("plain 20 channels -> 24", 1, 20, 24, 9, 10, 3, 1, 1)),
        square("1x1 with padding 1", 1, 32, 48, 5, 6, 1, 1, 1),
        depthwise(24, 14, 3, 1),
        depthwise(40, 13, 3, 2),
        depthwise(144, 28, 3, 2),
        depthwise(24, 7, 5, 1),
        depthwise(40, 14, 5, 2),
        depthwise(144, 7, 5, 1),
        depthwise(144, 56, 3, 1),
    };
    ConvCase dil = square("3x3 dilation 2", 1, 32, 32, 14, 13, 3, 1, 2);
    dil.dh = dil.dw = 2;
    c.push_back(dil);
    // DeepLabV3's ASPP: most taps read padding, chunks stay within rows, and the channel slabs
    // are sized by the taps a chunk reads (nchwc_conv_tiling.h).
    ConvCase aspp = square("3x3 dilation 12 on 14x14, slabs", 1, 320, 64, 14, 14, 3, 1, 12);
    aspp.dh = aspp.dw = 12;
    c.push_back(aspp);
    ConvCase dil3 = square("3x3 dilation 3, stride 2", 2, 48, 32, 13, 11, 3, 2, 3);
    dil3.dh = dil3.dw = 3;
    c.push_back(dil3);
    ConvCase dwDil = depthwise(24, 13, 3, 1);
    dwDil.name = "depthwise dilation 2";
    dwDil.dh = dwDil.dw = 2;
    dwDil.padTop = dwDil.padLeft = dwDil.padBottom = dwDil.padRight = 2;
    c.push_back(dwDil);
    c.push_back(ConvCase{"asymmetric pads", 1, 20, 36, 9, 11, 3, 3, 2, 1, 0, 1, 2, 0});
    c.push_back(ConvCase{"3x5 kernel, pads 2,1,0,3", 1, 17, 18, 8, 10, 3, 5, 1, 2, 2, 1, 0, 3});
    ConvCase dwAsym{"depthwise asymmetric pads", 2, 40, 40, 10, 9, 3, 3, 2, 2, 0, 0, 1, 1};
    dwAsym.depthwise = true;
    c.push_back(dwAsym);
    ConvCase dwOdd{"depthwise 4x3 kernel, stride 3", 1, 20, 20, 13, 14, 4, 3, 3, 3, 1, 1, 2, 1};
    dwOdd.depthwise = true;
    c.push_back(dwOdd);
    c.push_back(
        plain(ConvCase{"plain asymmetric, stride 3", 1, 3, 20, 11, 10, 4, 2, 3, 3, 0, 1, 2, 1}));
    ConvCase plainDil = plain(square("plain dilation 2", 1, 4, 24, 12, 11, 3, 1, 2));
    plainDil.dh = plainDil.dw = 2;
    c.push_back(plainDil);
    for (int64_t width : {7, 13, 14, 28, 56, 112}) {
      c.push_back(square("3x3 width " + std::to_string(width), 1, 16, 32, 3, width, 3, 1, 1));
    }
    c.push_back(square("1x1 width 112", 1, 32, 16, 2, 112, 1, 1, 0));
    // Fewer pixels than one register block of pixels (a single short chunk per output group).
    c.push_back(square("1x1 40 -> 72 on 1x5 pixels", 1, 40, 72, 1, 5, 1, 1, 0));
    // Input channels in many slabs, not a multiple of 16 (the weights of the next slab prefetched).
    c.push_back(square("3x3 200 -> 72, slabs", 1, 200, 72, 6, 7, 3, 1, 1));
    c.push_back(square("3x3 s2 130 -> 64, slabs", 1, 130, 64, 9, 9, 3, 2, 1));
    c.push_back(square("1x1 300 -> 80, slabs", 1, 300, 80, 5, 7, 1, 1, 0));
    // Weights smaller than X and Y no larger than X: tasks run band-major (all groups per band).
    c.push_back(square("1x1 128 -> 80 at 20x20, band-major", 1, 128, 80, 20, 20, 1, 1, 0));
    c.push_back(
        square("3x3 s2 32 -> 80 at 40x40, band-major, 2 images", 2, 32, 80, 40, 40, 3, 2, 1));
    c.push_back(square("1x1 s2 272 -> 40, slabs, 2 images", 2, 272, 40, 7, 7, 1, 2, 0));
    // RGB images: pixel chunks within one output row (strided path) and across rows.
    c.push_back(plain(square("plain RGB 3x3 s2 -> 32, width 37", 1, 3, 32, 9, 37, 3, 2, 1)));
    c.push_back(plain(square("plain RGB 3x3 s2 -> 64, no padding", 1, 3, 64, 11, 31, 3, 2, 0)));
    c.push_back(plain(square("plain RGB 5x5 s1 -> 48", 1, 3, 48, 8, 19, 5, 1, 2)));
    c.push_back(plain(square("plain 1 channel -> 16", 2, 1, 16, 9, 10, 3, 1, 1)));
    return c;
  }();
  return cases;
}

class NchwcConvKernel : public ::testing::TestWithParam<std::tuple<CpuIsa, int>> {};

TEST_P(NchwcConvKernel, MatchesDirectLoop) {
  const auto [isa, threads] = GetParam();
  if (isa > detectedCpuIsa()) GTEST_SKIP() << "the CPU lacks " << cpuIsaName(isa);
  ScopedCpuIsaLimit limit(isa);
  kiln::testing::ScopedThreads scopedThreads(threads);
  for (const ConvCase& t : shapeCases()) {
    for (bool withResidual : {false, true}) checkCase(t, Activation{}, withResidual);
  }
}

TEST_P(NchwcConvKernel, FusedActivations) {
  const auto [isa, threads] = GetParam();
  if (isa > detectedCpuIsa()) GTEST_SKIP() << "the CPU lacks " << cpuIsaName(isa);
  ScopedCpuIsaLimit limit(isa);
  kiln::testing::ScopedThreads scopedThreads(threads);
  const std::vector<ConvCase> cases{square("Ci 24 -> Co 40", 1, 24, 40, 7, 7, 3, 1, 1),
                                    square("1x1 40 -> 72, 2 images", 2, 40, 72, 9, 13, 1, 1, 0),
                                    plain(square("plain 3 -> 20 s2", 1, 3, 20, 9, 9, 3, 2, 1)),
                                    depthwise(40, 9, 3, 1)};
  const std::vector<Activation> acts{{ActivationKind::kRelu, 0, 0},
                                     {ActivationKind::kClip, 0.0f, 0.6f},
                                     {ActivationKind::kLeakyRelu, 0.1f, 0},
                                     {ActivationKind::kSigmoid, 0, 0},
                                     {ActivationKind::kHardSigmoid, 0.2f, 0.5f},
                                     {ActivationKind::kHardSwish, 0, 0},
                                     {ActivationKind::kSiLU, 0, 0},
                                     {ActivationKind::kGelu, 0, 0}};
  for (const ConvCase& t : cases) {
    for (const Activation& act : acts) {
      for (bool withResidual : {false, true}) checkCase(t, act, withResidual);
    }
  }
}

ConvCase grouped(ConvCase t, int64_t group) {
  t.group = group;
  return t;
}

// Grouped convolutions as RegNet, ResNeXt and detection necks have them, run as slices of whole
// blocks: 8 channels per group (two groups to a slice; 13 groups: the last slice holds one, and
// X's NaN padding channels sit right after it), 4 per group (four to a slice), 16, 32, 48 and 64
// per group, 8 -> 16 per group,
// 3x3 and 1x1, strides 1 and 2, pads, batch 2, channels in slabs; with the fused epilogues.
TEST_P(NchwcConvKernel, GroupedConvolutions) {
  const auto [isa, threads] = GetParam();
  if (isa > detectedCpuIsa()) GTEST_SKIP() << "the CPU lacks " << cpuIsaName(isa);
  ScopedCpuIsaLimit limit(isa);
  kiln::testing::ScopedThreads scopedThreads(threads);
  const std::vector<ConvCase> cases{
      grouped(square("8 per group, 104 channels, 3x3 s1", 1, 104, 104, 9, 9, 3, 1, 1), 13),
      grouped(square("8 per group, 3x3 s2, batch 2", 2, 48, 48, 14, 13, 3, 2, 1), 6),
      grouped(square("4 per group (ResNeXt), 3x3 s1", 1, 64, 64, 11, 12, 3, 1, 1), 16),
      grouped(square("4 per group, 3x3 s2, batch 2", 2, 32, 32, 9, 9, 3, 2, 1), 8),
      grouped(square("16 per group, 3x3 s1", 1, 64, 64, 10, 11, 3, 1, 1), 4),
      grouped(square("32 per group, 1x1", 1, 128, 128, 7, 7, 1, 1, 0), 4),
      grouped(square("64 per group, 3x3 s2, batch 2", 2, 128, 128, 15, 15, 3, 2, 1), 2),
      grouped(square("64 per group, 3x3 at 7x7, slabs", 1, 512, 512, 7, 7, 3, 1, 1), 8),
      grouped(square("8 -> 16 per group, 1x1 s2", 1, 32, 64, 12, 12, 1, 2, 0), 4),
      grouped(square("48 -> 32 per group, 3x3 s1, batch 2", 2, 96, 64, 6, 9, 3, 1, 1), 2),
      grouped(ConvCase{"16 per group, asymmetric pads, stride (2, 1)", 1, 48, 48, 9, 11, 3, 3, 2, 1,
                       0, 1, 2, 0},
              3),
  };
  for (const ConvCase& t : cases) {
    for (bool withResidual : {false, true}) checkCase(t, Activation{}, withResidual);
  }
  const std::vector<Activation> acts{{ActivationKind::kRelu, 0, 0},
                                     {ActivationKind::kClip, 0.0f, 0.6f},
                                     {ActivationKind::kSiLU, 0, 0}};
  for (const ConvCase& t : {cases[0], cases[1], cases[5]}) {
    for (const Activation& act : acts) {
      for (bool withResidual : {false, true}) checkCase(t, act, withResidual);
    }
  }
}

// The first convolutions of the benchmark CNNs on a plain (NCHW) image, shrunk: ResNet-50's 7x7
// s2 p3, MobileNetV2's / EfficientNet's 3x3 s2 p1, SqueezeNet's 3x3 s2 p0 (odd output size),
// with 1, 3 and 4 input channels, Co not a multiple of 16, rows long enough for several pixel
// chunks, kernels wider than the image (no interior pixels), stride 1, 3 and dilation.
TEST_P(NchwcConvKernel, PlainImageFirstConvs) {
  const auto [isa, threads] = GetParam();
  if (isa > detectedCpuIsa()) GTEST_SKIP() << "the CPU lacks " << cpuIsaName(isa);
  ScopedCpuIsaLimit limit(isa);
  kiln::testing::ScopedThreads scopedThreads(threads);
  std::vector<ConvCase> cases{
      plain(square("resnet conv1 7x7 s2 p3, 29x29", 1, 3, 64, 29, 29, 7, 2, 3)),
      plain(square("mobilenet 3x3 s2 p1, width 61", 1, 3, 32, 12, 61, 3, 2, 1)),
      plain(square("squeezenet 3x3 s2 p0, odd output", 1, 3, 64, 23, 23, 3, 2, 0)),
      plain(square("1 channel -> 20, 3x3 s2 p1, batch 2", 2, 1, 20, 15, 16, 3, 2, 1)),
      plain(square("4 channels -> 40, 7x7 s2 p3", 1, 4, 40, 17, 30, 7, 2, 3)),
      plain(square("3 -> 56 (groups 2 + 2), 3x3 s1 p1, batch 2", 2, 3, 56, 6, 33, 3, 1, 1)),
      plain(square("3 -> 24, 7x7 p3 on a 4x5 image (no interior)", 1, 3, 24, 4, 5, 7, 1, 3)),
      plain(square("3 -> 16, 3x3 s3 p1 (one pixel at a time)", 1, 3, 16, 10, 14, 3, 3, 1)),
      plain(ConvCase{"3 -> 48, 5x3 s(1,2), pads 2,0,1,2", 1, 3, 48, 9, 26, 5, 3, 1, 2, 2, 0, 1, 2}),
  };
  ConvCase dilated = plain(square("3 -> 32, 3x3 s2 dilation 2", 1, 3, 32, 13, 40, 3, 2, 2));
  dilated.dh = dilated.dw = 2;
  cases.push_back(dilated);
  for (const ConvCase& t : cases) {
    for (bool withResidual : {false, true}) checkCase(t, Activation{}, withResidual);
  }
  const std::vector<Activation> acts{{ActivationKind::kRelu, 0, 0},
                                     {ActivationKind::kClip, 0.0f, 0.6f},
                                     {ActivationKind::kSiLU, 0, 0},
                                     {ActivationKind::kSigmoid, 0, 0}};
  for (const ConvCase& t : {cases[1], cases[3]}) {
    for (const Activation& act : acts) {
      for (bool withResidual : {false, true}) checkCase(t, act, withResidual);
    }
  }
}

// Y computed in place of the residual Z (the memory plan lets a conv overwrite a Z that dies
// there) equals Y computed into its own buffer.
TEST_P(NchwcConvKernel, PlainImageInPlaceOfTheResidual) {
  const auto [isa, threads] = GetParam();
  if (isa > detectedCpuIsa()) GTEST_SKIP() << "the CPU lacks " << cpuIsaName(isa);
  ScopedCpuIsaLimit limit(isa);
  kiln::testing::ScopedThreads scopedThreads(threads);
  const ConvCase t = plain(square("3 -> 40, 3x3 s2 p1, batch 2", 2, 3, 40, 14, 27, 3, 2, 1));
  const NchwcConvShape s = shapeOf(t);
  const int64_t yFloats = t.n * s.outBlocks() * s.outHeight * s.outWidth * kB;
  const std::vector<float> x = randomFloats(t.n * t.ci * t.h * t.w, 1);
  const std::vector<float> w = randomFloats(t.co * t.ci * t.kh * t.kw, 2);
  std::vector<float> bias = randomFloats(s.outBlocks() * kB, 3);
  std::fill(bias.begin() + t.co, bias.end(), 0.0f);
  const NchwcPackedWeights packed =
      packNchwcWeights(w.data(), t.co, t.ci, t.kh, t.kw, NchwcWeightLayout::kPlainInput);
  const std::vector<float> z = randomFloats(yFloats, 4);
  NchwcConvArgs args;
  args.shape = &s;
  args.x = x.data();
  args.weights = packed.data.get();
  args.bias = bias.data();
  args.act = Activation{ActivationKind::kRelu, 0, 0};
  std::vector<float> separate(static_cast<size_t>(yFloats)), shared = z;
  args.residual = z.data();
  args.y = separate.data();
  nchwcConv(args);
  args.residual = shared.data();
  args.y = shared.data();
  nchwcConv(args);
  for (int64_t i = 0; i < yFloats; ++i) {
    if (i % kB + (i / (s.outHeight * s.outWidth * kB)) % s.outBlocks() * kB < t.co) {
      ASSERT_EQ(shared[static_cast<size_t>(i)], separate[static_cast<size_t>(i)]) << "at " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(IsaAndThreads, NchwcConvKernel,
                         ::testing::Combine(::testing::Values(CpuIsa::kAvx2, CpuIsa::kAvx512),
                                            ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return std::string(cpuIsaName(std::get<0>(info.param))) + "_threads" +
                                  std::to_string(std::get<1>(info.param));
                         });

// ---- end to end: a model with one kiln::NchwcConv node ----

// X (graph input) -> NchwcConv(W, B initializers; Z a graph input when given) -> Y.
// B is an initializer, a graph input (biasAsInput) or absent (b empty).
std::string nchwcConvModel(const std::string& name, const std::vector<int64_t>& xShape,
                           const ConvCase& t, const std::vector<float>& w,
                           const std::vector<float>& b, const std::vector<int64_t>* zShape,
                           bool weightsAsInput, bool biasAsInput = false) {
  onnx::ModelProto model = kiln::testing::makeModel(13);
  auto* imp = model.add_opset_import();
  imp->set_domain("kiln");
  imp->set_version(1);
  kiln::testing::addInput(model, "x", xShape);
  const std::vector<int64_t> wShape{t.co, t.inPerGroup(), t.kh, t.kw};
  if (weightsAsInput)
    kiln::testing::addInput(model, "w", wShape);
  else
    kiln::testing::addFloatInitializer(model, "w", wShape, w);
  if (biasAsInput)
    kiln::testing::addInput(model, "b", {t.co});
  else if (!b.empty())
    kiln::testing::addFloatInitializer(model, "b", {static_cast<int64_t>(b.size())}, b);
  std::vector<std::string> inputs{"x", "w"};
  if (biasAsInput || !b.empty()) inputs.push_back("b");
  if (zShape) {
    kiln::testing::addInput(model, "z", *zShape);
    inputs.push_back("z");
  }
  kiln::testing::addNode(model, "NchwcConv", inputs, {"y"}, "conv_" + name);
  auto* node = kiln::testing::lastNode(model);
  node->set_domain("kiln");
  auto ints = [&](const char* attr, std::vector<int64_t> v) {
    auto* a = node->add_attribute();
    a->set_name(attr);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t i : v) a->add_ints(i);
  };
  ints("kernel_shape", {t.kh, t.kw});
  ints("strides", {t.sh, t.sw});
  ints("pads", {t.padTop, t.padLeft, t.padBottom, t.padRight});
  ints("dilations", {t.dh, t.dw});
  if (t.depthwise) kiln::testing::setInt(node, "group", t.ci);
  auto* act = node->add_attribute();
  act->set_name("activation");
  act->set_type(onnx::AttributeProto::STRING);
  act->set_s("Relu");
  auto* out = model.mutable_graph()->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  const auto dir = kiln::testing::tempDir("nchwc_conv_" + name);
  return kiln::testing::saveModel(model, dir / "model.onnx");
}

TEST(NchwcConvNode, RunsThroughASessionWithBiasResidualAndRelu) {
  const ConvCase t = square("session", 2, 24, 40, 9, 9, 3, 2, 1);
  const std::vector<float> x = randomFloats(t.n * t.ci * t.h * t.w, 5),
                           w = randomFloats(t.co * t.ci * 9, 6), b = randomFloats(t.co, 7),
                           z = randomFloats(t.n * t.co * t.outH() * t.outW(), 8);
  const std::vector<int64_t> xShape{t.n, 2, t.h, t.w, kB}, zShape{t.n, 3, t.outH(), t.outW(), kB};
  Session session(nchwcConvModel("session", xShape, t, w, b, &zShape, false));
  const NamedTensors out =
      session.run({{"x", Tensor::fromVector<float>(DataType::kFloat32, xShape,
                                                   toBlocked(x, t.n, t.ci, t.h * t.w))},
                   {"z", Tensor::fromVector<float>(DataType::kFloat32, zShape,
                                                   toBlocked(z, t.n, t.co, t.outH() * t.outW()))}});
  const Tensor& y = out[0].second;
  ASSERT_EQ(y.shape(), (Shape{t.n, 3, t.outH(), t.outW(), kB}));
  const std::vector<float> got =
      fromBlocked(std::vector<float>(y.data<float>(), y.data<float>() + y.numel()), t.n, t.co,
                  t.outH() * t.outW());
  const std::vector<float> expected =
      reference(t, x, w, b, &z, Activation{ActivationKind::kRelu, 0, 0});
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], expected[i], 1e-4f * (15.0f + std::fabs(expected[i]))) << i;
}

// X's height and width unknown when the kernel is made: each run works out its own geometry.
TEST(NchwcConvNode, RunsAtSpatialSizesUnknownWhenMade) {
  const ConvCase shape = square("dynamic", 1, 24, 40, 9, 9, 3, 2, 1);
  const std::vector<float> w = randomFloats(shape.co * shape.ci * 9, 12),
                           b = randomFloats(shape.co, 13);
  const std::vector<int64_t> xShape{1, 2, -1, -1, kB};
  Session session(nchwcConvModel("dynamic", xShape, shape, w, b, nullptr, false));
  for (int64_t size : {9, 13, 9}) {
    const ConvCase t = square("dynamic", 1, 24, 40, size, size, 3, 2, 1);
    const std::vector<float> x = randomFloats(t.ci * t.h * t.w, 14);
    const NamedTensors out =
        session.run({{"x", Tensor::fromVector<float>(DataType::kFloat32, {1, 2, t.h, t.w, kB},
                                                     toBlocked(x, 1, t.ci, t.h * t.w))}});
    const Tensor& y = out[0].second;
    ASSERT_EQ(y.shape(), (Shape{1, 3, t.outH(), t.outW(), kB})) << "size " << size;
    const std::vector<float> got =
        fromBlocked(std::vector<float>(y.data<float>(), y.data<float>() + y.numel()), 1, t.co,
                    t.outH() * t.outW());
    const std::vector<float> expected =
        reference(t, x, w, b, nullptr, Activation{ActivationKind::kRelu, 0, 0});
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], expected[i], 1e-4f * (15.0f + std::fabs(expected[i])))
          << "size " << size << " at " << i;
    }
  }
}

TEST(NchwcConvNode, PlainImageInputThroughASession) {
  const ConvCase t = plain(square("plain", 1, 3, 20, 11, 11, 3, 2, 1));
  const std::vector<float> x = randomFloats(t.ci * t.h * t.w, 9),
                           w = randomFloats(t.co * t.ci * 9, 10), b = randomFloats(t.co, 11);
  const std::vector<int64_t> xShape{1, 3, t.h, t.w};
  Session session(nchwcConvModel("plain", xShape, t, w, b, nullptr, false));
  const NamedTensors out =
      session.run({{"x", Tensor::fromVector<float>(DataType::kFloat32, xShape, x)}});
  const Tensor& y = out[0].second;
  ASSERT_EQ(y.shape(), (Shape{1, 2, t.outH(), t.outW(), kB}));
  const std::vector<float> got =
      fromBlocked(std::vector<float>(y.data<float>(), y.data<float>() + y.numel()), 1, t.co,
                  t.outH() * t.outW());
  const std::vector<float> expected =
      reference(t, x, w, b, nullptr, Activation{ActivationKind::kRelu, 0, 0});
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], expected[i], 1e-4f * (6.0f + std::fabs(expected[i]))) << i;
}

TEST(NchwcConvNode, BiasComputedAtRunTimeOrAbsent) {
  const ConvCase t = square("bias", 1, 24, 40, 7, 7, 3, 1, 1);
  const std::vector<float> x = randomFloats(t.ci * t.h * t.w, 12),
                           w = randomFloats(t.co * t.ci * 9, 13), b = randomFloats(t.co, 14),
                           zeros(static_cast<size_t>(t.co), 0.0f);
  const std::vector<int64_t> xShape{1, 2, t.h, t.w, kB};
  const Tensor xBlocked =
      Tensor::fromVector<float>(DataType::kFloat32, xShape, toBlocked(x, 1, t.ci, t.h * t.w));
  auto check = [&](const Tensor& y, const std::vector<float>& bias) {
    const std::vector<float> got =
        fromBlocked(std::vector<float>(y.data<float>(), y.data<float>() + y.numel()), 1, t.co,
                    t.outH() * t.outW());
    const std::vector<float> expected =
        reference(t, x, w, bias, nullptr, Activation{ActivationKind::kRelu, 0, 0});
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], expected[i], 1e-4f * (15.0f + std::fabs(expected[i]))) << i;
    }
  };
  {
    SCOPED_TRACE("B a graph input");
    Session session(nchwcConvModel("bias_input", xShape, t, w, b, nullptr, false, true));
    check(session
              .run({{"x", xBlocked},
                    {"b", Tensor::fromVector<float>(DataType::kFloat32, {t.co}, b)}})[0]
              .second,
          b);
    // Another B on the next run: it is read on every run, not kept from the first.
    const std::vector<float> b2 = randomFloats(t.co, 15);
    check(session
              .run({{"x", xBlocked},
                    {"b", Tensor::fromVector<float>(DataType::kFloat32, {t.co}, b2)}})[0]
              .second,
          b2);
  }
  {
    SCOPED_TRACE("no B");
    Session session(nchwcConvModel("no_bias", xShape, t, w, {}, nullptr, false));
    check(session.run({{"x", xBlocked}})[0].second, zeros);
  }
}

TEST(NchwcConvNode, RefusesAConstantBiasOfTheWrongSize) {
  const ConvCase t = square("bad_b", 1, 16, 20, 5, 5, 3, 1, 1);
  const std::vector<float> w = randomFloats(20 * 16 * 9, 1), b = randomFloats(19, 2);
  try {
    Session session(nchwcConvModel("bad_b", {1, 1, 5, 5, kB}, t, w, b, nullptr, false));
    session.run({{"x", Tensor(DataType::kFloat32, {1, 1, 5, 5, kB})}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("one value per output channel"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("conv_bad_b"));
  }
}

TEST(NchwcConvNode, RefusesWeightsThatAreNotConstant) {
  const ConvCase t = square("w_input", 1, 16, 16, 5, 5, 3, 1, 1);
  const std::vector<float> w = randomFloats(16 * 16 * 9, 1), b = randomFloats(16, 2);
  try {
    Session session(nchwcConvModel("w_input", {1, 1, 5, 5, kB}, t, w, b, nullptr, true));
    session.run({{"x", Tensor(DataType::kFloat32, {1, 1, 5, 5, kB})},
                 {"w", Tensor(DataType::kFloat32, {16, 16, 3, 3})}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("constant"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("conv_w_input"));
  }
}

TEST(NchwcConvNode, RefusesAResidualOfAnotherShape) {
  const ConvCase t = square("bad_z", 1, 16, 16, 6, 6, 3, 1, 1);
  const std::vector<float> w = randomFloats(16 * 16 * 9, 1), b = randomFloats(16, 2);
  const std::vector<int64_t> zShape{1, 1, 5, 6, kB};
  try {
    Session session(nchwcConvModel("bad_z", {1, 1, 6, 6, kB}, t, w, b, &zShape, false));
    session.run({{"x", Tensor(DataType::kFloat32, {1, 1, 6, 6, kB})},
                 {"z", Tensor(DataType::kFloat32, zShape)}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("residual Z"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("conv_bad_z"));
  }
}

}  // namespace
TEST(NchwcConvNode, RefusesAnInputWhoseBlocksDoNotFitTheWeights) {
  const ConvCase t = square("bad_x", 1, 16, 16, 5, 5, 3, 1, 1);
  const std::vector<float> w = randomFloats(16 * 16 * 9, 1), b = randomFloats(16, 2);
  try {
    Session session(nchwcConvModel("bad_x", {1, 2, 5, 5, kB}, t, w, b, nullptr, false));
    session.run({{"x", Tensor(DataType::kFloat32, {1, 2, 5, 5, kB})}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("should hold 1 channel blocks"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("conv_bad_x"));
  }
}

}  // namespace kiln::cpu
