// The BF16 NchwcConv kernel (nchwc_conv_bf16.h) against the direct loop in double over NCHW,
// within BF16's bound: each product term off by at most 2 * 2^-8 + 2^-16 of its size, plus FP32
// sums, so |y - ref| <= that times (sum |x w| + |b| + |z|), computed by the same loop over the
// magnitudes. X's padding channels are NaN (they must not reach a real output); pointwise,
// strided, padded, dilated and several-group shapes, fused activations, one and two threads; and
// the plain-X (stem) kernel on the same terms.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/nchwc_conv.h"
#include "backends/cpu/kernels/nchwc_conv_bf16.h"
#include "ir/precision.h"
#include "ir/sym_shape.h"
#include "nchwc_conv_reference.h"
#include "nchwc_test_layout.h"
#include "random_data.h"
#include "scoped_threads.h"

namespace kiln::cpu {
namespace {

using kiln::testing::ConvCase;
using kiln::testing::square;

constexpr int64_t kB = 16;
const double kTermError =
    2 * std::ldexp(1.0, -8) + std::ldexp(1.0, -16) + 5000 * std::ldexp(1.0, -24);

std::vector<float> magnitudes(std::vector<float> v) {
  for (float& x : v) x = std::fabs(x);
  return v;
}

void checkCase(const ConvCase& t, const Activation& act, bool withResidual) {
  SCOPED_TRACE(t.name + (withResidual ? " +residual" : ""));
  const NchwcConvShape s = kiln::testing::shapeOf(t);
  const int64_t outPlane = s.outHeight * s.outWidth;
  const std::vector<float> x = kiln::testing::randomFloats(t.n * t.ci * t.h * t.w, 1);
  const std::vector<float> w = kiln::testing::randomFloats(t.co * t.ci * t.kh * t.kw, 2);
  const std::vector<float> b = kiln::testing::randomFloats(t.co, 3);
  const std::vector<float> z = kiln::testing::randomFloats(t.n * t.co * outPlane, 4);
  const std::vector<float>* zp = withResidual ? &z : nullptr;
  NchwcPackedWeights packed;
  if (t.plain) {
    packed = packNchwcPlainBf16Weights(w.data(), t.co, t.ci, t.kh, t.kw);
    ASSERT_EQ(packed.floats, nchwcPlainBf16WeightWords(t.co, t.ci, t.kh, t.kw));
  } else {
    const NchwcPackedWeights blocked =
        packNchwcWeights(w.data(), t.co, t.ci, t.kh, t.kw, NchwcWeightLayout::kBlockedInput);
    packed = packNchwcBf16Weights(blocked, t.co, t.ci, t.kh * t.kw);
    ASSERT_EQ(packed.floats, nchwcBf16WeightWords(t.co, t.ci, t.kh * t.kw));
  }
  const std::vector<float> xBlocked =
      t.plain ? x : kiln::testing::toBlocked(x, t.n, t.ci, t.h * t.w);
  const std::vector<float> zBlocked = kiln::testing::toBlocked(z, t.n, t.co, outPlane);
  std::vector<float> bias(static_cast<size_t>(s.outBlocks() * kB), 0.0f);
  std::copy(b.begin(), b.end(), bias.begin());
  std::vector<float> y(static_cast<size_t>(t.n * s.outBlocks() * outPlane * kB), 12345.0f);
  std::vector<uint32_t> scratch(
      (t.plain ? nchwcPlainConvBf16ScratchBytes(s) : nchwcConvBf16ScratchBytes(s)) /
      sizeof(uint32_t));
  NchwcConvArgs args;
  args.shape = &s;
  args.x = xBlocked.data();
  args.bias = bias.data();
  args.residual = zp ? zBlocked.data() : nullptr;
  args.act = act;
  args.y = y.data();
  const auto* words = reinterpret_cast<const uint32_t*>(packed.data.get());
  if (t.plain)
    detail::nchwcPlainConvBf16Avx512(args, words, scratch.data());
  else
    detail::nchwcConvBf16Avx512(args, words, scratch.data());
  const std::vector<float> got = kiln::testing::fromBlocked(y, t.n, t.co, outPlane);
  const std::vector<float> want = kiln::testing::reference(t, x, w, b, zp, act);
  const std::vector<float> zMagnitude = magnitudes(z);
  const std::vector<float> size = kiln::testing::reference(
      t, magnitudes(x), magnitudes(w), magnitudes(b), zp ? &zMagnitude : nullptr, {});
  for (size_t i = 0; i < got.size(); ++i) {
    // Relu and Clip do not widen an error; Sigmoid's slope is at most 1/4, SiLU's about 1.1.
    ASSERT_LE(std::fabs(got[i] - want[i]), 1.1 * kTermError * size[i] + 1e-6)
        << "at " << i << ": " << got[i] << " vs " << want[i];
  }
}

const std::vector<ConvCase>& cases() {
  static const std::vector<ConvCase> c = [] {
    std::vector<ConvCase> v{
        square("1x1 64->64", 1, 64, 64, 14, 14, 1, 1, 0),
        square("1x1 256->64 odd width", 1, 256, 64, 7, 13, 1, 1, 0),
        square("3x3 s1 p1", 1, 64, 64, 14, 14, 3, 1, 1),
        square("3x3 s2 p1", 1, 48, 64, 28, 28, 3, 2, 1),
        square("1x1 s2 downsample", 1, 64, 128, 14, 14, 1, 2, 0),
        square("Ci 24 -> Co 40", 1, 24, 40, 13, 13, 3, 1, 1),
        square("Ci 5 -> Co 3", 1, 5, 3, 6, 9, 3, 1, 1),
        square("Co 160: groups 3 + 3 + 4", 1, 16, 160, 6, 5, 3, 1, 1),
        square("batch 2", 2, 24, 40, 7, 7, 3, 1, 1),
        square("1x1 with padding 1", 1, 32, 48, 5, 6, 1, 1, 1),
        square("1x1 40 -> 72 on 1x5 pixels", 1, 40, 72, 1, 5, 1, 1, 0),
        square("3x3 200 -> 72", 1, 200, 72, 6, 7, 3, 1, 1),
    };
    ConvCase dil = square("3x3 dilation 2", 1, 32, 32, 14, 13, 3, 1, 2);
    dil.dh = dil.dw = 2;
    v.push_back(dil);
    v.push_back(ConvCase{"3x5 kernel, pads 2,1,0,3", 1, 17, 18, 8, 10, 3, 5, 1, 2, 2, 1, 0, 3});
    return v;
  }();
  return c;
}

// Plain X (the stem kernel, column pairs): ResNet's 7x7 stride-2 stem, MobileNet's 3x3 one,
// an even-wide kernel (no odd last pair), one input channel, dilated rows, wide padding, stride 1.
const std::vector<ConvCase>& plainCases() {
  static const std::vector<ConvCase> c = [] {
    std::vector<ConvCase> v{
        square("7x7 s2 p3 RGB -> 64", 1, 3, 64, 30, 33, 7, 2, 3),
        square("3x3 s2 p1 RGB -> 32", 2, 3, 32, 17, 16, 3, 2, 1),
        square("3x3 s1 p1 gray -> 24", 1, 1, 24, 9, 11, 3, 1, 1),
        square("5x5 s1 p4, Ci 5 -> Co 20", 1, 5, 20, 6, 7, 5, 1, 4),
        ConvCase{"4x4 kernel s2, pads 1,2,0,1", 1, 3, 48, 12, 15, 4, 4, 2, 2, 1, 2, 0, 1},
        ConvCase{"2x6 kernel s1, Co 160", 1, 4, 160, 5, 13, 2, 6, 1, 1, 0, 2, 1, 3},
    };
    ConvCase dil = square("3x3 rows dilated 2", 1, 3, 16, 12, 12, 3, 1, 2);
    dil.dh = 2;
    v.push_back(dil);
    for (ConvCase& t : v) t.plain = true;
    return v;
  }();
  return c;
}

class NchwcConvBf16 : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!cpuSupports(CpuIsa::kAvx512Bf16)) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  }
};

TEST_P(NchwcConvBf16, MatchesDirectLoopWithinBf16Bound) {
  kiln::testing::ScopedThreads threads(GetParam());
  for (const ConvCase& t : cases()) checkCase(t, {}, false);
}

TEST_P(NchwcConvBf16, PlainInputMatchesDirectLoopWithinBf16Bound) {
  kiln::testing::ScopedThreads threads(GetParam());
  for (const ConvCase& t : plainCases()) {
    checkCase(t, {}, false);
    checkCase(t, Activation{ActivationKind::kRelu, 0, 0}, true);
  }
}

// An odd kernel's last column pair also holds the pixel just right of the window (weight 0): an
// infinite one there must not turn the sum into NaN (0 * inf).
TEST_P(NchwcConvBf16, PlainInputIgnoresThePixelPastAnOddWindow) {
  kiln::testing::ScopedThreads threads(GetParam());
  ConvCase t = square("3x3 s2 p0", 1, 3, 16, 5, 5, 3, 2, 0);
  t.plain = true;
  // 2x2 outputs over columns 0-2 and 2-4; column 3 infinite: past the window of the first
  // column's outputs (in their last pair), inside the second's.
  const NchwcConvShape s = kiln::testing::shapeOf(t);
  std::vector<float> x(static_cast<size_t>(3 * 5 * 5), 1.0f);
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t row = 0; row < 5; ++row) x[static_cast<size_t>((c * 5 + row) * 5 + 3)] = INFINITY;
  const std::vector<float> w(static_cast<size_t>(16 * 3 * 9), 0.5f);
  const NchwcPackedWeights packed = packNchwcPlainBf16Weights(w.data(), 16, 3, 3, 3);
  std::vector<float> bias(kB, 0.0f), y(static_cast<size_t>(4 * kB), 0.0f);
  std::vector<uint32_t> scratch(nchwcPlainConvBf16ScratchBytes(s) / sizeof(uint32_t));
  NchwcConvArgs args;
  args.shape = &s;
  args.x = x.data();
  args.bias = bias.data();
  args.y = y.data();
  detail::nchwcPlainConvBf16Avx512(args, reinterpret_cast<const uint32_t*>(packed.data.get()),
                                   scratch.data());
  for (int64_t pixel = 0; pixel < 4; ++pixel) {
    const float v = y[static_cast<size_t>(pixel * kB)];
    if (pixel % 2 == 0)
      EXPECT_EQ(v, 13.5f) << "pixel " << pixel;  // 27 taps of 0.5 * 1, its window all finite
    else
      EXPECT_TRUE(std::isinf(v)) << "pixel " << pixel << ": " << v;
  }
}

TEST_P(NchwcConvBf16, FusedResidualAndActivations) {
  kiln::testing::ScopedThreads threads(GetParam());
  for (ActivationKind kind : {ActivationKind::kRelu, ActivationKind::kSigmoid}) {
    Activation act;
    act.kind = kind;
    checkCase(square("3x3 24->40 s1", 1, 24, 40, 9, 9, 3, 1, 1), act, true);
    checkCase(square("1x1 64->32", 2, 64, 32, 7, 7, 1, 1, 0), act, true);
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, NchwcConvBf16, ::testing::Values(1, 2));

// A stem marked bf16 (plain RGB X) takes the column-pair kernel; a horizontal stride of 3 is
// declined by name and runs FP32.
TEST(NchwcConvBf16Selection, PlainStemMarkedBf16TakesTheColumnPairKernel) {
  if (!cpuSupports(CpuIsa::kAvx512Bf16)) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  const Tensor w = Tensor::fromVector<float>(DataType::kFloat32, {64, 3, 7, 7},
                                             kiln::testing::randomFloats(64 * 3 * 49, 5));
  const ir::TypeInfo wType{DataType::kFloat32, ir::symShapeOf(w.shape())};
  const ir::TypeInfo x{DataType::kFloat32, ir::symShapeOf({1, 3, 224, 224})};
  auto select = [&](int64_t stride) {
    ir::Node node;
    node.name = "conv1";
    node.domain = "kiln";
    node.opType = "NchwcConv";
    node.attrs["kernel_shape"] = std::vector<int64_t>{7, 7};
    node.attrs["strides"] = std::vector<int64_t>{stride, stride};
    node.attrs["pads"] = std::vector<int64_t>{3, 3, 3, 3};
    node.attrs[ir::kPrecisionAttr] = std::string("bf16");
    node.inputs = {0, 1};
    node.outputs = {2};
    return KernelRegistry::global().select({node, {&x, &wType}, {nullptr, &w}, {}});
  };
  const KernelSelection s2 = select(2);
  ASSERT_NE(s2.chosen, nullptr);
  EXPECT_EQ(s2.chosen->id, "bf16_nchwc_conv_plain_input_avx512bf16");
  const KernelSelection s3 = select(3);
  ASSERT_NE(s3.chosen, nullptr);
  EXPECT_EQ(s3.chosen->id.rfind("f32_nchwc_conv_plain_input_", 0), 0u) << s3.chosen->id;
  EXPECT_THAT(s3.declined, ::testing::Contains(
                               std::make_pair(std::string("bf16_nchwc_conv_plain_input_avx512bf16"),
                                              std::string("takes horizontal strides 1 and 2"))));
}

}  // namespace
}  // namespace kiln::cpu
