// The BF16 NchwcConv kernel (nchwc_conv_bf16.h) against the direct loop in double over NCHW,
// within BF16's bound: each product term off by at most 2 * 2^-8 + 2^-16 of its size, plus FP32
// sums, so |y - ref| <= that times (sum |x w| + |b| + |z|), computed by the same loop over the
// magnitudes. X's padding channels are NaN (they must not reach a real output); pointwise,
// strided, padded, dilated and several-group shapes, fused activations, one and two threads.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels/nchwc_conv.h"
#include "backends/cpu/kernels/nchwc_conv_bf16.h"
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
  const NchwcPackedWeights blocked =
      packNchwcWeights(w.data(), t.co, t.ci, t.kh, t.kw, NchwcWeightLayout::kBlockedInput);
  const NchwcPackedWeights packed = packNchwcBf16Weights(blocked, t.co, t.ci, t.kh * t.kw);
  ASSERT_EQ(packed.floats, nchwcBf16WeightWords(t.co, t.ci, t.kh * t.kw));
  const std::vector<float> xBlocked = kiln::testing::toBlocked(x, t.n, t.ci, t.h * t.w);
  const std::vector<float> zBlocked = kiln::testing::toBlocked(z, t.n, t.co, outPlane);
  std::vector<float> bias(static_cast<size_t>(s.outBlocks() * kB), 0.0f);
  std::copy(b.begin(), b.end(), bias.begin());
  std::vector<float> y(static_cast<size_t>(t.n * s.outBlocks() * outPlane * kB), 12345.0f);
  std::vector<uint32_t> scratch(nchwcConvBf16ScratchBytes(s) / sizeof(uint32_t));
  NchwcConvArgs args;
  args.shape = &s;
  args.x = xBlocked.data();
  args.bias = bias.data();
  args.residual = zp ? zBlocked.data() : nullptr;
  args.act = act;
  args.y = y.data();
  detail::nchwcConvBf16Avx512(args, reinterpret_cast<const uint32_t*>(packed.data.get()),
                              scratch.data());
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

}  // namespace
}  // namespace kiln::cpu
