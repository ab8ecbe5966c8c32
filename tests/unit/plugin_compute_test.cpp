// The compute of the built-in example plugins (src/plugins/*_compute.h), checked against values
// printed by PyTorch 1.13 / torchvision 0.14, hand-computed values, and independent formulas
// written here. The full models against PyTorch are in the Python plugin model tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/thread_pool.h"
#include "plugins/bicubic_resize_compute.h"
#include "plugins/deform_conv2d_compute.h"
#include "plugins/myselu_compute.h"
#include "random_data.h"

namespace kiln::plugins {
namespace {

using kiln::testing::randomFloats;

void expectAllNear(const std::vector<float>& actual, const std::vector<double>& expected,
                   double relTol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i], relTol * std::max(1.0, std::fabs(expected[i])))
        << what << " at " << i;
}

// --- MYSELU -------------------------------------------------------------------------------

TEST(PluginMyselu, HandValues) {
  const std::vector<float> x = {0.0f, 1.0f, -2.0f, 100.0f, -100.0f, 3.5f, -0.25f, 20.0f, -20.0f};
  std::vector<float> y(x.size());
  myselu(x.data(), y.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_NEAR(y[1], 0.7310585786f, 1e-6);   // 1 / (1 + e^-1)
  EXPECT_NEAR(y[2], -0.2384058440f, 1e-6);  // -2 / (1 + e^2)
  EXPECT_FLOAT_EQ(y[3], 100.0f);
  EXPECT_LE(std::fabs(y[4]), 1e-30f);    // -100 / (1 + e^100): zero in float
  EXPECT_NEAR(y[5], 3.3974072f, 1e-5);   // 3.5 / (1 + e^-3.5)
  EXPECT_NEAR(y[6], -0.1094559f, 1e-6);  // -0.25 / (1 + e^0.25)
  EXPECT_FLOAT_EQ(y[7], 20.0f * (1.0f / (1.0f + std::exp(-20.0f))));
  EXPECT_NEAR(y[8], -20.0 / (1.0 + std::exp(20.0)), 1e-12);
}

TEST(PluginMyselu, MatchesFormulaAcrossBlocksAndThreads) {
  cpu::ThreadPool pool(3);
  cpu::ThreadPoolScope scope(&pool);
  for (size_t count : {size_t{1}, size_t{7}, size_t{37}, size_t{100003}}) {
    const std::vector<float> x = randomFloats(count, 7, -30.0f, 30.0f);
    std::vector<float> y(count);
    myselu(x.data(), y.data(), static_cast<int64_t>(count));
    std::vector<double> expected(count);
    for (size_t i = 0; i < count; ++i)
      expected[i] = x[i] / (1.0 + std::exp(-static_cast<double>(x[i])));
    expectAllNear(y, expected, 1e-6, "myselu count " + std::to_string(count));
  }
}

TEST(PluginMyselu, InPlace) {
  std::vector<float> x = {-1.0f, 0.5f, 2.0f};
  myselu(x.data(), x.data(), 3);
  EXPECT_NEAR(x[0], -0.2689414f, 1e-6);
  EXPECT_NEAR(x[1], 0.3112296f, 1e-6);
  EXPECT_NEAR(x[2], 1.7615942f, 1e-6);
}

// --- bicubic resize -----------------------------------------------------------------------

// Keys' kernel as a function of the distance, and a direct 2-D sum over it: an independent
// formulation of PyTorch's bicubic (weights by distance to each clamped tap, in double).
double keys(double d) {
  const double a = -0.75;
  d = std::fabs(d);
  if (d <= 1.0) return ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0;
  if (d < 2.0) return ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a;
  return 0.0;
}

double sourceCoordinate(int64_t d, int64_t in, int64_t out, bool alignCorners) {
  if (alignCorners)
    return out > 1 ? d * static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  return (d + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5;
}

std::vector<double> referenceBicubic(const std::vector<float>& in, int64_t planes, int64_t inH,
                                     int64_t inW, int64_t outH, int64_t outW, bool alignCorners) {
  std::vector<double> out;
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t y = 0; y < outH; ++y) {
      const double sy = sourceCoordinate(y, inH, outH, alignCorners);
      for (int64_t x = 0; x < outW; ++x) {
        const double sx = sourceCoordinate(x, inW, outW, alignCorners);
        double sum = 0.0;
        for (int64_t m = static_cast<int64_t>(std::floor(sy)) - 1;
             m <= static_cast<int64_t>(std::floor(sy)) + 2; ++m) {
          for (int64_t n = static_cast<int64_t>(std::floor(sx)) - 1;
               n <= static_cast<int64_t>(std::floor(sx)) + 2; ++n) {
            const int64_t cm = std::clamp<int64_t>(m, 0, inH - 1),
                          cn = std::clamp<int64_t>(n, 0, inW - 1);
            sum += keys(sy - m) * keys(sx - n) * in[(p * inH + cm) * inW + cn];
          }
        }
        out.push_back(sum);
      }
    }
  }
  return out;
}

std::vector<float> runBicubic(const std::vector<float>& in, int64_t planes, int64_t inH,
                              int64_t inW, int64_t outH, int64_t outW, bool alignCorners) {
  std::vector<float> out(static_cast<size_t>(planes * outH * outW), -1.0f);
  bicubicResize(in.data(), out.data(), planes, inH, inW, outH, outW, alignCorners);
  return out;
}

// The literal expectations were printed by torch 1.13:
//   F.interpolate(x, size=(..), mode='bicubic', align_corners=..).flatten().tolist()
TEST(PluginBicubicResize, TwoByTwoToFourByFourMatchesPyTorch) {
  const std::vector<float> in = {1, 2, 3, 4};
  const std::vector<double> torchOut = {
      0.68359375, 1.015625,  1.5625,    1.89453125, 1.34765625, 1.6796875, 2.2265625, 2.55859375,
      2.44140625, 2.7734375, 3.3203125, 3.65234375, 3.10546875, 3.4375,    3.984375,  4.31640625};
  expectAllNear(runBicubic(in, 1, 2, 2, 4, 4, false), torchOut, 1e-6, "2x2 -> 4x4");
  expectAllNear(runBicubic(in, 1, 2, 2, 4, 4, false), referenceBicubic(in, 1, 2, 2, 4, 4, false),
                1e-6, "formula");
}

TEST(PluginBicubicResize, AlignCornersMatchesPyTorch) {
  const std::vector<float> in = {1, 2, 3, 4};
  const std::vector<double> torchOut = {1.0, 1.2265625, 1.5, 1.7734375, 2.0,
                                        2.0, 2.2265625, 2.5, 2.7734375, 3.0,
                                        3.0, 3.2265625, 3.5, 3.7734375, 4.0};
  expectAllNear(runBicubic(in, 1, 2, 2, 3, 5, true), torchOut, 1e-6, "2x2 -> 3x5 align_corners");
}

TEST(PluginBicubicResize, SingleOutputRowFollowsPyTorchNotOnnx) {
  // x[i] = i^2 / 10 on a 3x4 plane. align_corners=false with one output row samples source row
  // 1 (= 0.5 * 3 - 0.5), where ONNX's pytorch_half_pixel would take row 0.
  std::vector<float> in(12);
  for (int i = 0; i < 12; ++i) in[i] = static_cast<float>(i * i) / 10.0f;
  expectAllNear(runBicubic(in, 1, 3, 4, 1, 2, false), {1.946874976158142, 4.353125095367432}, 1e-6,
                "half pixel");
  expectAllNear(runBicubic(in, 1, 3, 4, 1, 2, true), {0.0, 0.8999999761581421}, 1e-6,
                "align corners");
}

TEST(PluginBicubicResize, SameSizeIsIdentity) {
  const std::vector<float> in = randomFloats(5 * 6, 3);
  const std::vector<float> out = runBicubic(in, 1, 5, 6, 5, 6, false);
  for (size_t i = 0; i < in.size(); ++i) EXPECT_FLOAT_EQ(out[i], in[i]);
}

TEST(PluginBicubicResize, UpAndDownMatchFormulaOnManyPlanesWithThreads) {
  cpu::ThreadPool pool(4);
  cpu::ThreadPoolScope scope(&pool);
  struct Case {
    int64_t inH, inW, outH, outW;
  };
  for (const Case& c : {Case{5, 7, 2, 3}, Case{4, 3, 11, 9}, Case{1, 1, 3, 2}, Case{6, 6, 6, 13},
                        Case{16, 9, 7, 31}}) {
    for (bool alignCorners : {false, true}) {
      const int64_t planes = 6;
      const std::vector<float> in = randomFloats(static_cast<size_t>(planes * c.inH * c.inW), 11);
      const std::string what = std::to_string(c.inH) + "x" + std::to_string(c.inW) + " -> " +
                               std::to_string(c.outH) + "x" + std::to_string(c.outW) +
                               (alignCorners ? " align_corners" : "");
      expectAllNear(runBicubic(in, planes, c.inH, c.inW, c.outH, c.outW, alignCorners),
                    referenceBicubic(in, planes, c.inH, c.inW, c.outH, c.outW, alignCorners), 1e-5,
                    what);
    }
  }
}

TEST(PluginBicubicResize, AxisPlanClampsTapsAndWeightsSumToOne) {
  const BicubicAxisPlan plan = planBicubicAxis(2, 4, false);
  ASSERT_EQ(plan.index.size(), 4u);
  // Output 0 samples -0.25: taps -2..1 clamp to 0, 0, 0, 1, with t = 0.75.
  EXPECT_EQ(plan.index[0], (std::array<int64_t, 4>{0, 0, 0, 1}));
  EXPECT_NEAR(plan.weight[0][0], keys(1.75), 1e-6);
  EXPECT_NEAR(plan.weight[0][3], keys(1.25), 1e-6);
  for (const auto& w : plan.weight) EXPECT_NEAR(w[0] + w[1] + w[2] + w[3], 1.0f, 1e-6);
}

TEST(PluginBicubicResize, LargeUpscaleWeightsMatchPyTorchPrecision) {
  // 256 -> 768, output 386: source 128.333.. where a float coordinate has an ulp of 1.5e-5.
  // PyTorch's weights (printed by resizing one-hot rows) show a float scale but a double
  // coordinate; a float coordinate would put the second weight at 0.7962853, off by 7e-6.
  // (PyTorch evaluates the cubic in float: its weights differ from these double-evaluated ones
  // by up to 2.6e-7.)
  const BicubicAxisPlan plan = planBicubicAxis(256, 768, false);
  EXPECT_EQ(plan.index[386], (std::array<int64_t, 4>{127, 128, 129, 130}));
  const std::array<double, 4> torchWeights = {-0.11111116409301758, 0.7962921261787415,
                                              0.37037551403045654, -0.0555567741394043};
  for (int k = 0; k < 4; ++k)
    EXPECT_NEAR(plan.weight[386][k], torchWeights[k], 4e-7) << "tap " << k;
}

// --- deform_conv2d ------------------------------------------------------------------------

// Bilinear sampling with zero outside as a sum of tent weights over every pixel: a formulation
// independent of torchvision's corner tests (a point at <= -1 or >= H is at distance >= 1 from
// every row, so it is 0; a neighbour outside the image simply is not in the sum).
double tentSample(const float* plane, int64_t h, int64_t w, double y, double x) {
  double sum = 0.0;
  for (int64_t yy = 0; yy < h; ++yy)
    for (int64_t xx = 0; xx < w; ++xx)
      sum += std::max(0.0, 1.0 - std::fabs(y - yy)) * std::max(0.0, 1.0 - std::fabs(x - xx)) *
             plane[yy * w + xx];
  return sum;
}

struct DeformCase {
  DeformConv2dParams p;
  std::vector<float> input, weight, offset, mask, bias;  // mask, bias empty = absent
};

std::vector<double> referenceDeformConv(const DeformCase& c) {
  const DeformConv2dParams& p = c.p;
  const int64_t oh = p.outHeight(), ow = p.outWidth(), taps = p.kernelHeight * p.kernelWidth;
  const int64_t cinG = p.inChannels / p.groups, coutG = p.outChannels / p.groups;
  const int64_t cPerOffsetGroup = p.inChannels / p.offsetGroups;
  std::vector<double> out;
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t o = 0; o < p.outChannels; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x) {
          double sum = c.bias.empty() ? 0.0 : c.bias[o];
          const int64_t g = o / coutG;
          for (int64_t ci = 0; ci < cinG; ++ci) {
            const int64_t cin = g * cinG + ci, og = cin / cPerOffsetGroup;
            const float* plane = &c.input[((n * p.inChannels) + cin) * p.inHeight * p.inWidth];
            for (int64_t i = 0; i < p.kernelHeight; ++i)
              for (int64_t j = 0; j < p.kernelWidth; ++j) {
                const int64_t tap = og * taps + i * p.kernelWidth + j;
                auto at = [&](const std::vector<float>& t, int64_t channels, int64_t ch) {
                  return t[((n * channels + ch) * oh + y) * ow + x];
                };
                const double dy = at(c.offset, 2 * p.offsetGroups * taps, 2 * tap);
                const double dx = at(c.offset, 2 * p.offsetGroups * taps, 2 * tap + 1);
                const double m = c.mask.empty() ? 1.0 : at(c.mask, p.offsetGroups * taps, tap);
                const double sy = y * p.strideH - p.padH + i * p.dilationH + dy;
                const double sx = x * p.strideW - p.padW + j * p.dilationW + dx;
                const double wv =
                    c.weight[((o * cinG + ci) * p.kernelHeight + i) * p.kernelWidth + j];
                sum += wv * m * tentSample(plane, p.inHeight, p.inWidth, sy, sx);
              }
          }
          out.push_back(sum);
        }
  return out;
}

std::vector<float> runDeformConv(const DeformCase& c) {
  const DeformConv2dParams& p = c.p;
  std::vector<float> out(
      static_cast<size_t>(p.batch * p.outChannels * p.outHeight() * p.outWidth()), -7.0f);
  std::vector<float> columns(static_cast<size_t>(deformConv2dColumnsSize(p)), -7.0f);
  deformConv2d(p, c.input.data(), c.weight.data(), c.offset.data(),
               c.mask.empty() ? nullptr : c.mask.data(), c.bias.empty() ? nullptr : c.bias.data(),
               out.data(), columns.data());
  return out;
}

DeformCase randomDeformCase(bool withMask, bool withBias, uint32_t seed) {
  DeformCase c;
  DeformConv2dParams& p = c.p;
  p.batch = 2, p.inChannels = 4, p.inHeight = 7, p.inWidth = 6, p.outChannels = 6;
  p.kernelHeight = 3, p.kernelWidth = 2, p.strideH = 2, p.strideW = 1, p.padH = 1, p.padW = 2;
  p.dilationH = 1, p.dilationW = 2, p.groups = 2, p.offsetGroups = 2;
  const int64_t pixels = p.outHeight() * p.outWidth(), taps = p.kernelHeight * p.kernelWidth;
  c.input =
      randomFloats(static_cast<size_t>(p.batch * p.inChannels * p.inHeight * p.inWidth), seed);
  c.weight =
      randomFloats(static_cast<size_t>(p.outChannels * (p.inChannels / p.groups) * taps), seed + 1);
  // Offsets up to +-3 pixels send some samples partly or wholly outside the image.
  c.offset = randomFloats(static_cast<size_t>(p.batch * 2 * p.offsetGroups * taps * pixels),
                          seed + 2, -3.0f, 3.0f);
  if (withMask)
    c.mask = randomFloats(static_cast<size_t>(p.batch * p.offsetGroups * taps * pixels), seed + 3,
                          0.0f, 1.0f);
  if (withBias) c.bias = randomFloats(static_cast<size_t>(p.outChannels), seed + 4);
  return c;
}

TEST(PluginDeformConv2d, HandComputedSamples) {
  // One 2x2 plane [[1, 2], [3, 4]], a 1x1 kernel of weight 1, so each output is one sample.
  DeformCase c;
  c.p.inHeight = 2, c.p.inWidth = 2;
  c.input = {1, 2, 3, 4};
  c.weight = {1};
  // Output (0,0) samples (0.5, 0.5): the mean 2.5. (0,1) samples (-0.5, 1): half of row 0's 2,
  // the missing row -1 counts 0. (1,0) samples (1, -1): outside, 0. (1,1) samples (1.25, 0.5):
  // below the last row by 0.25, so 0.75 * mean(3, 4).
  c.offset = {0.5f, -0.5f, 0.0f,  0.25f,   // dy of outputs (0,0), (0,1), (1,0), (1,1)
              0.5f, 0.0f,  -1.0f, -0.5f};  // dx
  expectAllNear(runDeformConv(c), {2.5, 1.0, 0.0, 0.75 * 3.5}, 1e-6, "hand samples");
  c.mask = {2.0f, 1.0f, 5.0f, 0.5f};
  c.bias = {10.0f};
  expectAllNear(runDeformConv(c), {15.0, 11.0, 10.0, 10.0 + 0.375 * 3.5}, 1e-6, "mask and bias");
}

// Ordinary grouped convolution with zero padding, written directly, each tap reading the input
// at an integer shift (shiftY, shiftX) from its usual position.
std::vector<double> shiftedConvolution(const DeformCase& c, int64_t shiftY, int64_t shiftX) {
  const DeformConv2dParams& p = c.p;
  const int64_t oh = p.outHeight(), ow = p.outWidth(), cinG = p.inChannels / p.groups,
                coutG = p.outChannels / p.groups;
  std::vector<double> conv;
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t o = 0; o < p.outChannels; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x) {
          double sum = c.bias.empty() ? 0.0 : c.bias[o];
          for (int64_t ci = 0; ci < cinG; ++ci)
            for (int64_t i = 0; i < p.kernelHeight; ++i)
              for (int64_t j = 0; j < p.kernelWidth; ++j) {
                const int64_t sy = y * p.strideH - p.padH + i * p.dilationH + shiftY;
                const int64_t sx = x * p.strideW - p.padW + j * p.dilationW + shiftX;
                if (sy < 0 || sy >= p.inHeight || sx < 0 || sx >= p.inWidth) continue;
                const int64_t cin = (o / coutG) * cinG + ci;
                sum += c.weight[((o * cinG + ci) * p.kernelHeight + i) * p.kernelWidth + j] *
                       c.input[((n * p.inChannels + cin) * p.inHeight + sy) * p.inWidth + sx];
              }
          conv.push_back(sum);
        }
  return conv;
}

TEST(PluginDeformConv2d, ZeroOffsetsWithoutMaskIsOrdinaryConvolution) {
  DeformCase c = randomDeformCase(false, true, 20);
  std::fill(c.offset.begin(), c.offset.end(), 0.0f);
  const std::vector<double> conv = shiftedConvolution(c, 0, 0);
  expectAllNear(runDeformConv(c), conv, 1e-5, "zero offsets");
  const DeformConv2dParams& p = c.p;
  c.mask.assign(static_cast<size_t>(p.batch * p.offsetGroups * p.kernelHeight * p.kernelWidth *
                                    p.outHeight() * p.outWidth()),
                1.0f);
  expectAllNear(runDeformConv(c), conv, 1e-5, "zero offsets, mask of ones");
}

TEST(PluginDeformConv2d, IntegerOffsetsAreShiftedConvolution) {
  // dy = 2, dx = -1 at every tap and position.
  DeformCase c = randomDeformCase(false, true, 30);
  const DeformConv2dParams& p = c.p;
  const int64_t pixels = p.outHeight() * p.outWidth(),
                offsetChannels = 2 * p.offsetGroups * p.kernelHeight * p.kernelWidth;
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t ch = 0; ch < offsetChannels; ++ch)
      std::fill_n(c.offset.begin() + (n * offsetChannels + ch) * pixels, pixels,
                  ch % 2 == 0 ? 2.0f : -1.0f);
  expectAllNear(runDeformConv(c), shiftedConvolution(c, 2, -1), 1e-5, "integer offsets");
}

TEST(PluginDeformConv2d, FractionalOffsetsGroupsAndMaskMatchTentFormula) {
  cpu::ThreadPool pool(3);
  cpu::ThreadPoolScope scope(&pool);
  for (bool withMask : {false, true}) {
    for (bool withBias : {false, true}) {
      const DeformCase c = randomDeformCase(withMask, withBias, 40);
      expectAllNear(
          runDeformConv(c), referenceDeformConv(c), 1e-5,
          std::string(withMask ? "mask" : "no mask") + (withBias ? ", bias" : ", no bias"));
    }
  }
}

TEST(PluginDeformConv2d, ParamsFromShapes) {
  DeformConv2dAttrs a;
  a.strideH = 2, a.padW = 2, a.dilationW = 2, a.groups = 2, a.offsetGroups = 2, a.padH = 1;
  auto p = deformConv2dParams("dc", a, {2, 4, 7, 6}, {6, 2, 3, 2}, {2, 24, 4, 8},
                              std::vector<int64_t>{2, 12, 4, 8}, std::vector<int64_t>{6});
  ASSERT_TRUE(p.ok()) << p.status().toString();
  EXPECT_EQ(p->outHeight(), 4);
  EXPECT_EQ(p->outWidth(), 8);
  EXPECT_EQ(p->kernelHeight, 3);
  EXPECT_EQ(p->outChannels, 6);
  EXPECT_EQ(deformConv2dColumnsSize(*p), 4 * 6 * 4 * 8);
}

TEST(PluginDeformConv2d, BadShapesNameTheTensorAndExpectedValue) {
  DeformConv2dAttrs a;
  a.groups = 2, a.offsetGroups = 2;
  auto message = [&](const std::vector<int64_t>& weight, const std::vector<int64_t>& offset,
                     std::optional<std::vector<int64_t>> mask,
                     std::optional<std::vector<int64_t>> bias) {
    auto p = deformConv2dParams("dcn1", a, {1, 4, 5, 5}, weight, offset, mask, bias);
    EXPECT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), ErrorCode::kInvalidValue);
    return p.status().message();
  };
  const std::string offsetMessage =
      message({6, 2, 3, 3}, {1, 18, 3, 3}, std::nullopt, std::nullopt);
  EXPECT_NE(offsetMessage.find("dcn1"), std::string::npos) << offsetMessage;
  EXPECT_NE(offsetMessage.find("offset shape must be [1, 36, 3, 3]"), std::string::npos)
      << offsetMessage;
  EXPECT_NE(message({6, 4, 3, 3}, {1, 36, 3, 3}, std::nullopt, std::nullopt)
                .find("weight shape [6, 4, 3, 3]"),
            std::string::npos);
  EXPECT_NE(message({6, 2, 3, 3}, {1, 36, 3, 3}, std::vector<int64_t>{1, 9, 3, 3}, std::nullopt)
                .find("mask shape must be [1, 18, 3, 3]"),
            std::string::npos);
  EXPECT_NE(message({6, 2, 3, 3}, {1, 36, 3, 3}, std::nullopt, std::vector<int64_t>{4})
                .find("bias shape must be [6]"),
            std::string::npos);
  EXPECT_NE(message({5, 2, 3, 3}, {1, 36, 3, 3}, std::nullopt, std::nullopt)
                .find("not divisible by groups"),
            std::string::npos);
  a.strideH = 0;
  EXPECT_NE(message({6, 2, 3, 3}, {1, 36, 3, 3}, std::nullopt, std::nullopt)
                .find("stride must be positive"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::plugins
