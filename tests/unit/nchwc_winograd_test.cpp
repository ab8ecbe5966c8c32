// Winograd in the blocked layout (backends/cpu/kernels/nchwc_winograd.h) against a direct 3x3
// convolution in double over NCHW: F(2x2,3x3) and F(4x4,3x3), odd sizes (partial tiles), padding
// 1, 0 and asymmetric, channel counts that are not multiples of 16 (X's padding channels hold NaN,
// which must not reach Y), several bands of tiles and passes over tile rows, batch 2, bias +
// residual + Relu / Clip / SiLU, one and two threads; which NchwcConv nodes the kernel registry
// gives a Winograd candidate; and ONNX Conv + Add + Relu models run through a Session, whose
// layout pass makes them NchwcConv nodes that run Winograd.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "activation_reference.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/nchwc_winograd.h"
#include "ir/sym_shape.h"
#include "kiln/session.h"
#include "model_builder.h"
#include "nchwc_test_layout.h"
#include "random_data.h"
#include "scoped_threads.h"

namespace kiln::cpu {
namespace {

using kiln::testing::fromBlocked;
using kiln::testing::randomFloats;
using kiln::testing::toBlocked;
using testing::activationReference;

constexpr int64_t kB = 16;

struct WinogradCase {
  std::string name;
  int64_t n, ci, co, h, w;
  int64_t padTop, padLeft, padBottom, padRight;
  int64_t outH() const { return h + padTop + padBottom - 2; }
  int64_t outW() const { return w + padLeft + padRight - 2; }
};

WinogradCase padded(std::string name, int64_t n, int64_t ci, int64_t co, int64_t h, int64_t w,
                    int64_t pad) {
  return WinogradCase{std::move(name), n, ci, co, h, w, pad, pad, pad, pad};
}

// act(conv3x3(x, w) + b + z) in double.
std::vector<double> reference(const WinogradCase& t, const std::vector<float>& x,
                              const std::vector<float>& w, const std::vector<float>& b,
                              const std::vector<float>* z, const Activation& act) {
  const int64_t oh = t.outH(), ow = t.outW();
  std::vector<double> y(static_cast<size_t>(t.n * t.co * oh * ow));
  for (int64_t i = 0; i < t.n; ++i)
    for (int64_t o = 0; o < t.co; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double acc = b[o];
          for (int64_t c = 0; c < t.ci; ++c)
            for (int64_t ky = 0; ky < 3; ++ky)
              for (int64_t kx = 0; kx < 3; ++kx) {
                const int64_t iy = oy - t.padTop + ky, ix = ox - t.padLeft + kx;
                if (iy < 0 || iy >= t.h || ix < 0 || ix >= t.w) continue;
                acc += double(x[((i * t.ci + c) * t.h + iy) * t.w + ix]) *
                       w[((o * t.ci + c) * 3 + ky) * 3 + kx];
              }
          const size_t at = static_cast<size_t>(((i * t.co + o) * oh + oy) * ow + ox);
          if (z) acc += (*z)[at];
          y[at] = activationReference(act, acc);
        }
  return y;
}

// The largest |kernel - reference| over Y, in units of the sum's scale sqrt(9 Ci) (values in
// [-1, 1]); fails the test if a padding channel of Y is not finite.
double maxScaledError(const WinogradCase& t, int tile, const Activation& act, bool withResidual) {
  const int64_t outPlane = t.outH() * t.outW(), outBlocks = (t.co + kB - 1) / kB;
  const std::vector<float> x = randomFloats(t.n * t.ci * t.h * t.w, 1),
                           w = randomFloats(t.co * t.ci * 9, 2), b = randomFloats(t.co, 3),
                           z = randomFloats(t.n * t.co * outPlane, 4);
  const std::vector<float>* zp = withResidual ? &z : nullptr;
  NchwcConvShape s;
  s.batch = t.n;
  s.inChannels = t.ci;
  s.outChannels = t.co;
  s.height = t.h;
  s.width = t.w;
  s.outHeight = t.outH();
  s.outWidth = t.outW();
  s.kernelH = s.kernelW = 3;
  s.padTop = t.padTop;
  s.padLeft = t.padLeft;
  const NchwcWinogradWeights packed = packNchwcWinogradWeights(w.data(), t.co, t.ci, tile);
  const std::vector<float> xBlocked = toBlocked(x, t.n, t.ci, t.h * t.w);
  const std::vector<float> zBlocked =
      toBlocked(z, t.n, t.co, outPlane);  // NaN padding lanes must be ignored
  std::vector<float> bias(static_cast<size_t>(outBlocks * kB), 0.0f);
  std::copy(b.begin(), b.end(), bias.begin());
  std::vector<float> y(static_cast<size_t>(t.n * outBlocks * outPlane * kB), 12345.0f);
  NchwcConvArgs args;
  args.shape = &s;
  args.x = xBlocked.data();
  args.bias = bias.data();
  args.residual = withResidual ? zBlocked.data() : nullptr;
  args.act = act;
  args.y = y.data();
  nchwcWinogradConv(args, packed);
  for (size_t i = 0; i < y.size(); ++i) {
    const int64_t channel =
        static_cast<int64_t>(i) % kB + static_cast<int64_t>(i) / (outPlane * kB) % outBlocks * kB;
    if (channel >= t.co) {
      EXPECT_TRUE(std::isfinite(y[i])) << "padding channel value " << y[i] << " at " << i;
    }
  }
  const std::vector<float> got = fromBlocked(y, t.n, t.co, outPlane);
  const std::vector<double> expected = reference(t, x, w, b, zp, act);
  const double scale = std::sqrt(9.0 * double(t.ci));
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(double(got[i]) - expected[i]) / scale;
    if (!(e <= worst)) worst = e;  // NaN sticks
  }
  return worst;
}

// Measured worst errors / sqrt(9 Ci) on these cases: up to 6.7e-6 for F(4x4) (its transforms
// multiply by up to 8 and 1/24, adding rounding), below 1e-6 for F(2x2); the direct kernel's are
// about 1e-7. The bounds leave a margin of 3x.
double tolerance(int tile) { return tile == 2 ? 3e-6 : 2e-5; }

const std::vector<WinogradCase>& cases() {
  static const std::vector<WinogradCase> c{
      padded("resnet-like 64 -> 64, 14x14", 1, 64, 64, 14, 14, 1),
      padded("odd 13x11, Ci 24 -> Co 40", 1, 24, 40, 13, 11, 1),
      padded("padding 0, 9x7", 1, 20, 36, 9, 7, 0),
      padded("Ci 5 -> Co 3, 6x9", 1, 5, 3, 6, 9, 1),
      padded("Co 160: output blocks grouped 3 + 3 + 4", 1, 16, 160, 6, 5, 1),
      padded("7x7, 48 -> 96", 1, 48, 96, 7, 7, 1),
      padded("several bands: 64 -> 32, 41x38", 1, 64, 32, 41, 38, 1),
      padded("batch 2, 17 -> 33, 5x10", 2, 17, 33, 5, 10, 1),
      WinogradCase{"asymmetric pads 1,0,0,2", 1, 32, 48, 8, 11, 1, 0, 0, 2},
      padded("one output pixel", 1, 16, 16, 3, 3, 0),
      padded("two passes over tile rows (8 MiB each): 256 -> 16, 64x60", 1, 256, 16, 64, 60, 1),
  };
  return c;
}

class NchwcWinograd : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  void SetUp() override {
    if (detectedCpuIsa() < CpuIsa::kAvx512) GTEST_SKIP() << "the Winograd kernels need AVX-512";
  }
};

TEST_P(NchwcWinograd, MatchesDirectConvolutionInDouble) {
  const auto [tile, threads] = GetParam();
  kiln::testing::ScopedThreads scopedThreads(threads);
  for (const WinogradCase& t : cases()) {
    for (bool withResidual : {false, true}) {
      SCOPED_TRACE(t.name + (withResidual ? " +residual" : ""));
      EXPECT_LE(maxScaledError(t, tile, Activation{}, withResidual), tolerance(tile));
    }
  }
}

TEST_P(NchwcWinograd, FusedActivations) {
  const auto [tile, threads] = GetParam();
  kiln::testing::ScopedThreads scopedThreads(threads);
  const std::vector<Activation> acts{{ActivationKind::kRelu, 0, 0},
                                     {ActivationKind::kClip, -0.5f, 0.6f},
                                     {ActivationKind::kSiLU, 0, 0},
                                     {ActivationKind::kLeakyRelu, 0.1f, 0}};
  for (const WinogradCase& t : {cases()[1], cases()[7]}) {
    for (const Activation& act : acts) {
      for (bool withResidual : {false, true}) {
        SCOPED_TRACE(t.name + (withResidual ? " +residual" : "") + " act " +
                     activationName(act.kind));
        EXPECT_LE(maxScaledError(t, tile, act, withResidual), tolerance(tile));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TileAndThreads, NchwcWinograd,
                         ::testing::Combine(::testing::Values(2, 4), ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return "F" + std::to_string(std::get<0>(info.param)) + "x" +
                                  std::to_string(std::get<0>(info.param)) + "_threads" +
                                  std::to_string(std::get<1>(info.param));
                         });

// ---- kernel selection: which NchwcConv nodes get a Winograd candidate ----

ir::Node convNode(int64_t stride, int64_t group) {
  ir::Node node;
  node.name = "conv";
  node.domain = "kiln";
  node.opType = "NchwcConv";
  node.attrs["kernel_shape"] = std::vector<int64_t>{3, 3};
  node.attrs["strides"] = std::vector<int64_t>{stride, stride};
  node.attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  node.attrs["group"] = group;
  node.inputs = {0, 1};
  node.outputs = {2};
  return node;
}

ir::TypeInfo blockedType(int64_t channels, int64_t hw) {
  return ir::TypeInfo{DataType::kFloat32, ir::symShapeOf({1, (channels + 15) / 16, hw, hw, kB})};
}

// The id of the candidate the registry chooses for X of type x and constant W.
std::string chosenKernel(const ir::Node& node, const ir::TypeInfo* x, const Tensor& w) {
  const ir::TypeInfo wType{DataType::kFloat32, ir::symShapeOf(w.shape())};
  const cpu::KernelCreateInfo info{node, {x ? x : &wType, &wType}, {nullptr, &w}, {}};
  const cpu::KernelSelection s = cpu::KernelRegistry::global().select(info);
  return s.chosen ? s.chosen->id : "none";
}

TEST(NchwcWinogradSelection, ChosenOnlyWhereItApplies) {
  const int64_t c = 64, hw = 56;
  const Tensor w =
      Tensor::fromVector<float>(DataType::kFloat32, {c, c, 3, 3}, randomFloats(c * c * 9, 5));
  const ir::TypeInfo x = blockedType(c, hw);
  {
    // An AVX2 host: no Winograd, declined by name, and the direct AVX2 kernel.
    ScopedCpuIsaLimit limit(CpuIsa::kAvx2);
    EXPECT_EQ(chosenKernel(convNode(1, 1), &x, w), "f32_nchwc_conv_direct_avx2");
    const ir::TypeInfo wType{DataType::kFloat32, ir::symShapeOf(w.shape())};
    const ir::Node node = convNode(1, 1);
    const cpu::KernelCreateInfo info{node, {&x, &wType}, {nullptr, &w}, {}};
    const cpu::KernelSelection s = cpu::KernelRegistry::global().select(info);
    ASSERT_GE(s.declined.size(), 4u);  // the BF16 candidates (for layers marked bf16) come first
    const std::string bf16[] = {"bf16_nchwc_conv_winograd_f2x2_avx512bf16",
                                "bf16_nchwc_conv_direct_avx512bf16",
                                "bf16_nchwc_conv_plain_input_avx512bf16"};
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(s.declined[i], std::make_pair(bf16[i], std::string("needs avx512bf16")));
    EXPECT_EQ(s.declined[3], std::make_pair(std::string("f32_nchwc_conv_winograd_f4x4_avx512"),
                                            std::string("needs avx512f")));
  }
  if (activeCpuIsa() < CpuIsa::kAvx512) GTEST_SKIP() << "Winograd needs AVX-512";
  // Stride 2, plain X, unknown size, 1x1 kernel: the direct convolution.
  EXPECT_EQ(chosenKernel(convNode(2, 1), &x, w), "f32_nchwc_conv_direct_avx512");
  const ir::TypeInfo plainX{DataType::kFloat32, ir::symShapeOf({1, c, hw, hw})};
  EXPECT_EQ(chosenKernel(convNode(1, 1), &plainX, w), "f32_nchwc_conv_plain_input_avx512");
  ir::TypeInfo unknown = x;
  (*unknown.shape)[2] = ir::Dim::named("h");
  EXPECT_EQ(chosenKernel(convNode(1, 1), &unknown, w), "f32_nchwc_conv_direct_avx512");
  const Tensor w1 =
      Tensor::fromVector<float>(DataType::kFloat32, {c, c, 1, 1}, randomFloats(c * c, 6));
  EXPECT_EQ(chosenKernel(convNode(1, 1), &x, w1), "f32_nchwc_conv_direct_avx512");
  // ResNet-50's first 3x3 stage (14 x 14 tiles of 4 x 4), and 8x8 (4 x 4 tiles of 2 x 2 only).
  EXPECT_EQ(nchwcWinogradTile(hw, hw), 4);
  EXPECT_EQ(chosenKernel(convNode(1, 1), &x, w), "f32_nchwc_conv_winograd_f4x4_avx512");
  const ir::TypeInfo mid = blockedType(c, 12);  // 9 tiles of 4x4, 36 of 2x2
  EXPECT_EQ(nchwcWinogradTile(12, 12), 2);
  EXPECT_EQ(chosenKernel(convNode(1, 1), &mid, w), "f32_nchwc_conv_winograd_f2x2_avx512");
}

// A grouped 3x3 conv (8 channels per group, RegNet's) takes the grouped candidate, after the
// depthwise one declines it by name; Winograd and the direct kernel are for group 1.
TEST(NchwcConvSelection, GroupedConvsTakeTheGroupedCandidate) {
  const int64_t c = 64, group = 8;
  const Tensor w = Tensor::fromVector<float>(DataType::kFloat32, {c, c / group, 3, 3},
                                             randomFloats(c * 8 * 9, 7));
  const ir::TypeInfo x = blockedType(c, 14);
  const ir::TypeInfo wType{DataType::kFloat32, ir::symShapeOf(w.shape())};
  const ir::Node node = convNode(1, group);
  const cpu::KernelCreateInfo info{node, {&x, &wType}, {nullptr, &w}, {}};
  const std::string isa = activeCpuIsa() >= CpuIsa::kAvx512 ? "avx512" : "avx2";
  const cpu::KernelSelection s = cpu::KernelRegistry::global().select(info);
  ASSERT_NE(s.chosen, nullptr);
  EXPECT_EQ(s.chosen->id, "f32_nchwc_conv_grouped_" + isa);
  EXPECT_THAT(s.declined,
              ::testing::Contains(std::make_pair(
                  "f32_nchwc_conv_depthwise_" + isa,
                  std::string("grouped with more than one channel per group, not depthwise"))));
  if (activeCpuIsa() >= CpuIsa::kAvx512) {
    EXPECT_THAT(s.declined, ::testing::Contains(
                                std::make_pair(std::string("f32_nchwc_conv_winograd_f4x4_avx512"),
                                               std::string("takes 3x3 ungrouped convolutions"))));
  }
  // Groups of 2 channels are not blocked: no NchwcConv candidate takes them.
  const Tensor w4 =
      Tensor::fromVector<float>(DataType::kFloat32, {c, 2, 3, 3}, randomFloats(c * 2 * 9, 8));
  const ir::TypeInfo w4Type{DataType::kFloat32, ir::symShapeOf(w4.shape())};
  const ir::Node node4 = convNode(1, 32);
  const cpu::KernelSelection s4 =
      cpu::KernelRegistry::global().select({node4, {&x, &w4Type}, {nullptr, &w4}, {}});
  EXPECT_EQ(s4.chosen, nullptr);
  EXPECT_THAT(s4.declined, ::testing::Contains(std::make_pair(
                               "f32_nchwc_conv_grouped_" + isa,
                               std::string("64 -> 64 channels in 32 groups: takes 4, 8 or a "
                                           "multiple of 16 channels per group"))));
}

// ---- end to end: Conv (3x3, pad 1) + Add + Relu through a Session ----

// x [1, ci, hw, hw] -> Conv(W, B) -> Add(z) -> Relu -> y, all NCHW in the model.
std::string convAddReluModel(const WinogradCase& t, const std::vector<float>& w,
                             const std::vector<float>& b) {
  using namespace kiln::testing;
  onnx::ModelProto model = makeModel(13);
  addInput(model, "x", {t.n, t.ci, t.h, t.w});
  addInput(model, "z", {t.n, t.co, t.outH(), t.outW()});
  addFloatInitializer(model, "w", {t.co, t.ci, 3, 3}, w);
  addFloatInitializer(model, "b", {t.co}, b);
  addNode(model, "Conv", {"x", "w", "b"}, {"c"}, "conv");
  setInts(lastNode(model), "kernel_shape", {3, 3});
  setInts(lastNode(model), "pads", {t.padTop, t.padLeft, t.padBottom, t.padRight});
  addNode(model, "Add", {"c", "z"}, {"s"}, "add");
  addNode(model, "Relu", {"s"}, {"y"}, "relu");
  addOutput(model, "y", {t.n, t.co, t.outH(), t.outW()});
  return saveModel(model, tempDir("nchwc_winograd_" + std::to_string(t.h)) / "model.onnx");
}

TEST(NchwcWinogradSession, ConvAddReluMatchesTheDirectLoop) {
  // Outputs of 24x24 (F(4x4) on AVX-512), 14x14 (F(2x2)) and 7x7 (direct), at 1 and 2 threads.
  for (int64_t hw : {24, 14, 7}) {
    for (int threads : {1, 2}) {
      const WinogradCase t = padded("session " + std::to_string(hw), 1, 40, 36, hw, hw, 1);
      SCOPED_TRACE(t.name + ", threads " + std::to_string(threads));
      const std::vector<float> x = randomFloats(t.ci * t.h * t.w, 11),
                               w = randomFloats(t.co * t.ci * 9, 12), b = randomFloats(t.co, 13),
                               z = randomFloats(t.co * t.outH() * t.outW(), 14);
      SessionOptions options;
      options.threads = threads;
      Session session(convAddReluModel(t, w, b), options);
      const NamedTensors out =
          session.run({{"x", Tensor::fromVector<float>(DataType::kFloat32, {1, t.ci, t.h, t.w}, x)},
                       {"z", Tensor::fromVector<float>(DataType::kFloat32, {1, t.co, hw, hw}, z)}});
      const Tensor& y = out[0].second;
      ASSERT_EQ(y.shape(), (Shape{1, t.co, hw, hw}));
      const std::vector<double> expected =
          reference(t, x, w, b, &z, Activation{ActivationKind::kRelu, 0, 0});
      const double bound = tolerance(4) * std::sqrt(9.0 * double(t.ci));
      for (int64_t i = 0; i < y.numel(); ++i)
        ASSERT_NEAR(y.data<float>()[i], expected[size_t(i)], bound) << "at " << i;
    }
  }
}

}  // namespace
}  // namespace kiln::cpu
