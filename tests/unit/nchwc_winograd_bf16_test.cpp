// The BF16 Winograd kernel (nchwc_winograd.h, packNchwcWinogradBf16Weights) against a direct 3x3
// convolution in double, within the bound BF16 rounding allows: the kernel rounds each
// transformed input V and each transformed weight U to BF16 (relative error <= u = 2^-8 each),
// so each product U V is off by at most (2u + u^2) |U V|, and an output by that times
//   sum over positions (i, j) of |A^T[r][i]| |A^T[c][j]| sum over ci of |U_ij| |V_ij|,
// computed here by the same transforms in double over the magnitudes; plus the FP32 kernel's own
// rounding (nchwc_winograd_test.cpp's measured bound). Odd channel counts (a BF16 pair holding
// the last real channel and a padding one), X's padding channels NaN, partial tiles, asymmetric
// padding, residual and Relu, one and two threads, both tiles (the builder takes F(2x2) only:
// nchwc_conv.cpp); and which candidate takes a layer marked bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/nchwc_winograd.h"
#include "ir/precision.h"
#include "ir/sym_shape.h"
#include "nchwc_conv_reference.h"
#include "nchwc_test_layout.h"
#include "random_data.h"
#include "scoped_threads.h"

namespace kiln::cpu {
namespace {

using kiln::testing::fromBlocked;
using kiln::testing::randomFloats;
using kiln::testing::toBlocked;

constexpr int64_t kB = 16;
const double kU = std::ldexp(1.0, -8);

// B^T (alpha x alpha), G (alpha x 3) and A^T (m x alpha) of the kernel's F(m x m, 3 x 3).
struct Transforms {
  int m, alpha;
  std::vector<double> bt, g, at;
};
Transforms transformsOf(int m) {
  if (m == 2) {
    return {2,
            4,
            {1, 0, -1, 0, 0, 1, 1, 0, 0, -1, 1, 0, 0, 1, 0, -1},
            {1, 0, 0, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0, 0, 1},
            {1, 1, 1, 0, 0, 1, -1, -1}};
  }
  return {4,
          6,
          {4, 0,  -5, 0, 1, 0, 0, -4, -4, 1,  1, 0, 0, 4, -4, -1, 1, 0,
           0, -2, -1, 2, 1, 0, 0, 2,  -1, -2, 1, 0, 0, 4, 0,  -5, 0, 1},
          {1.0 / 4, 0, 0, -1.0 / 6, -1.0 / 6, -1.0 / 6, -1.0 / 6, 1.0 / 6, -1.0 / 6, 1.0 / 24,
           1.0 / 12, 1.0 / 6, 1.0 / 24, -1.0 / 12, 1.0 / 6, 0, 0, 1},
          {1, 1, 1, 1, 1, 0, 0, 1, -1, 2, -2, 0, 0, 1, 1, 4, 4, 0, 0, 1, -1, 8, -8, 1}};
}

struct Case {
  std::string name;
  int64_t n, ci, co, h, w, padTop, padLeft, padBottom, padRight;
  int64_t outH() const { return h + padTop + padBottom - 2; }
  int64_t outW() const { return w + padLeft + padRight - 2; }
};

// The largest |kernel - reference| / bound over Y (fails if a padding channel of Y is not finite).
double worstErrorOverBound(const Case& t, int tile, bool relu, bool withResidual) {
  const int64_t oh = t.outH(), ow = t.outW(), outPlane = oh * ow;
  const int64_t outBlocks = (t.co + kB - 1) / kB;
  const std::vector<float> x = randomFloats(t.n * t.ci * t.h * t.w, 21),
                           w = randomFloats(t.co * t.ci * 9, 22), b = randomFloats(t.co, 23),
                           z = randomFloats(t.n * t.co * outPlane, 24);
  NchwcConvShape s;
  s.batch = t.n;
  s.inChannels = t.ci;
  s.outChannels = t.co;
  s.height = t.h;
  s.width = t.w;
  s.outHeight = oh;
  s.outWidth = ow;
  s.kernelH = s.kernelW = 3;
  s.padTop = t.padTop;
  s.padLeft = t.padLeft;
  const NchwcWinogradWeights packed =
      packNchwcWinogradBf16Weights(packNchwcWinogradWeights(w.data(), t.co, t.ci, tile));
  EXPECT_EQ(packed.floats, nchwcWinogradWeightWords(t.co, t.ci, tile, true));
  const std::vector<float> xBlocked = toBlocked(x, t.n, t.ci, t.h * t.w);  // NaN padding lanes
  const std::vector<float> zBlocked = toBlocked(z, t.n, t.co, outPlane);
  std::vector<float> bias(static_cast<size_t>(outBlocks * kB), 0.0f);
  std::copy(b.begin(), b.end(), bias.begin());
  std::vector<float> y(static_cast<size_t>(t.n * outBlocks * outPlane * kB), 12345.0f);
  NchwcConvArgs args;
  args.shape = &s;
  args.x = xBlocked.data();
  args.bias = bias.data();
  args.residual = withResidual ? zBlocked.data() : nullptr;
  if (relu) args.act = Activation{ActivationKind::kRelu, 0, 0};
  args.y = y.data();
  nchwcWinogradConv(args, packed);
  for (size_t i = 0; i < y.size(); ++i) {
    const int64_t channel =
        static_cast<int64_t>(i) % kB + static_cast<int64_t>(i) / (outPlane * kB) % outBlocks * kB;
    if (channel >= t.co) EXPECT_TRUE(std::isfinite(y[i])) << "padding channel value at " << i;
  }
  const std::vector<float> got = fromBlocked(y, t.n, t.co, outPlane);

  // The direct convolution (Relu only shrinks the error).
  const kiln::testing::ConvCase direct{
      t.name, t.n, t.ci, t.co, t.h, t.w, 3, 3, 1, 1, t.padTop, t.padLeft, t.padBottom, t.padRight};
  const std::vector<float> want =
      kiln::testing::reference(direct, x, w, b, withResidual ? &z : nullptr,
                               relu ? Activation{ActivationKind::kRelu, 0, 0} : Activation{});
  const Transforms tr = transformsOf(tile);
  const int m = tr.m, A = tr.alpha;
  // |U| [co][ci][A][A] = |G g G^T|.
  std::vector<double> u(static_cast<size_t>(t.co * t.ci * A * A));
  for (int64_t o = 0; o < t.co; ++o)
    for (int64_t c = 0; c < t.ci; ++c)
      for (int i = 0; i < A; ++i)
        for (int j = 0; j < A; ++j) {
          double sum = 0;
          for (int k = 0; k < 3; ++k)
            for (int l = 0; l < 3; ++l)
              sum += tr.g[i * 3 + k] * w[((o * t.ci + c) * 3 + k) * 3 + l] * tr.g[j * 3 + l];
          u[static_cast<size_t>(((o * t.ci + c) * A + i) * A + j)] = std::fabs(sum);
        }
  const double fp32Tolerance = (tile == 2 ? 3e-6 : 2e-5) * std::sqrt(9.0 * double(t.ci));
  double worst = 0;
  std::vector<double> v(static_cast<size_t>(t.ci * A * A));
  for (int64_t img = 0; img < t.n; ++img)
    for (int64_t ty = 0; ty * m < oh; ++ty)
      for (int64_t tx = 0; tx * m < ow; ++tx) {
        // |V| [ci][A][A] = |B^T d B| of this tile's input (zero outside X).
        for (int64_t c = 0; c < t.ci; ++c)
          for (int i = 0; i < A; ++i)
            for (int j = 0; j < A; ++j) {
              double sum = 0;
              for (int k = 0; k < A; ++k)
                for (int l = 0; l < A; ++l) {
                  const int64_t iy = ty * m - t.padTop + k, ix = tx * m - t.padLeft + l;
                  if (iy < 0 || iy >= t.h || ix < 0 || ix >= t.w) continue;
                  sum += tr.bt[i * A + k] * x[((img * t.ci + c) * t.h + iy) * t.w + ix] *
                         tr.bt[j * A + l];
                }
              v[static_cast<size_t>((c * A + i) * A + j)] = std::fabs(sum);
            }
        for (int64_t o = 0; o < t.co; ++o) {
          std::vector<double> uv(static_cast<size_t>(A * A), 0.0);  // sum over ci of |U||V|
          for (int64_t c = 0; c < t.ci; ++c)
            for (int p = 0; p < A * A; ++p)
              uv[p] += u[static_cast<size_t>((o * t.ci + c) * A * A + p)] *
                       v[static_cast<size_t>(c * A * A + p)];
          for (int r = 0; r < m && ty * m + r < oh; ++r)
            for (int q = 0; q < m && tx * m + q < ow; ++q) {
              const int64_t oy = ty * m + r, ox = tx * m + q;
              double bound = 0;
              for (int i = 0; i < A; ++i)
                for (int j = 0; j < A; ++j)
                  bound +=
                      std::fabs(tr.at[r * A + i]) * std::fabs(tr.at[q * A + j]) * uv[i * A + j];
              bound = bound * (2 * kU + kU * kU) + fp32Tolerance;
              const size_t at = static_cast<size_t>(((img * t.co + o) * oh + oy) * ow + ox);
              const double e = std::fabs(double(got[at]) - double(want[at])) / bound;
              if (!(e <= worst)) worst = e;  // NaN sticks
            }
        }
      }
  return worst;
}

class NchwcWinogradBf16 : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  void SetUp() override {
    if (activeCpuIsa() < CpuIsa::kAvx512 || !cpuSupports(CpuIsa::kAvx512Bf16))
      GTEST_SKIP() << "the BF16 Winograd kernel needs AVX-512 and AVX512_BF16";
  }
};

TEST_P(NchwcWinogradBf16, MatchesDirectConvolutionWithinBf16Bound) {
  const auto [tile, threads] = GetParam();
  kiln::testing::ScopedThreads scopedThreads(threads);
  const std::vector<Case> cases{
      {"64 -> 64, 14x14", 1, 64, 64, 14, 14, 1, 1, 1, 1},
      {"odd Ci 5 -> Co 3, 6x9", 1, 5, 3, 6, 9, 1, 1, 1, 1},
      {"odd Ci 17 -> 33, batch 2, 5x10", 2, 17, 33, 5, 10, 1, 1, 1, 1},
      {"Co 160 (groups 3 + 3 + 4), 24 -> 160, 6x5", 1, 24, 160, 6, 5, 1, 1, 1, 1},
      {"asymmetric pads, 13x11", 1, 32, 48, 13, 11, 1, 0, 0, 2},
      {"several bands: 64 -> 32, 41x38", 1, 64, 32, 41, 38, 1, 1, 1, 1},
  };
  for (const Case& t : cases) {
    for (bool withResidual : {false, true}) {
      for (bool relu : {false, true}) {
        SCOPED_TRACE(t.name + (withResidual ? " +residual" : "") + (relu ? " +relu" : ""));
        EXPECT_LE(worstErrorOverBound(t, tile, relu, withResidual), 1.0);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TileAndThreads, NchwcWinogradBf16,
                         ::testing::Combine(::testing::Values(2, 4), ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return "F" + std::to_string(std::get<0>(info.param)) + "x" +
                                  std::to_string(std::get<0>(info.param)) + "_threads" +
                                  std::to_string(std::get<1>(info.param));
                         });

// A 3x3 stride-1 layer marked bf16 takes BF16 F(2x2) wherever FP32 takes Winograd; stride 2 takes
// the BF16 direct kernel; an unmarked layer the FP32 Winograd.
TEST(NchwcWinogradBf16Selection, MarkedLayersTakeBf16Winograd) {
  if (activeCpuIsa() < CpuIsa::kAvx512 || !cpuSupports(CpuIsa::kAvx512Bf16))
    GTEST_SKIP() << "needs AVX-512 and AVX512_BF16";
  const int64_t c = 64;
  const Tensor w =
      Tensor::fromVector<float>(DataType::kFloat32, {c, c, 3, 3}, randomFloats(c * c * 9, 25));
  const ir::TypeInfo wType{DataType::kFloat32, ir::symShapeOf(w.shape())};
  auto chosen = [&](int64_t hw, int64_t stride, bool bf16) {
    ir::Node node;
    node.name = "conv";
    node.domain = "kiln";
    node.opType = "NchwcConv";
    node.attrs["kernel_shape"] = std::vector<int64_t>{3, 3};
    node.attrs["strides"] = std::vector<int64_t>{stride, stride};
    node.attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    if (bf16) node.attrs[ir::kPrecisionAttr] = std::string("bf16");
    node.inputs = {0, 1};
    node.outputs = {2};
    const ir::TypeInfo x{DataType::kFloat32, ir::symShapeOf({1, c / kB, hw, hw, kB})};
    const KernelSelection s =
        KernelRegistry::global().select({node, {&x, &wType}, {nullptr, &w}, {}});
    return s.chosen ? s.chosen->id : std::string("none");
  };
  EXPECT_EQ(chosen(56, 1, true), "bf16_nchwc_conv_winograd_f2x2_avx512bf16");
  EXPECT_EQ(chosen(12, 1, true), "bf16_nchwc_conv_winograd_f2x2_avx512bf16");
  EXPECT_EQ(chosen(7, 1, true), "bf16_nchwc_conv_direct_avx512bf16");  // too few tiles
  EXPECT_EQ(chosen(56, 2, true), "bf16_nchwc_conv_direct_avx512bf16");
  EXPECT_EQ(chosen(56, 1, false), "f32_nchwc_conv_winograd_f4x4_avx512");
}

}  // namespace
}  // namespace kiln::cpu
