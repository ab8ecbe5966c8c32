// ConvTranspose marked bf16 (bf16_conv_transpose_gemm_avx512bf16, conv_transpose.cpp) against a
// direct loop in double, within BF16's bound: each product term off by at most 2 * 2^-8 + 2^-16
// of its size, plus FP32 sums and col2im adds, so |y - ref| <= that times (sum |x w| + |b|),
// computed by the same loop over the magnitudes. Upsampling (stride 2, kernel 4, pad 1), stride 1
// with output_padding, pointwise (the GEMM writes Y directly), 1-D, batch 2, one and two threads;
// the plan state round trip; and the reasons it declines.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernel_registry.h"
#include "engine/executor.h"
#include "ir/op_schema.h"
#include "ir/precision.h"
#include "ir/sym_shape.h"
#include "random_data.h"
#include "scoped_threads.h"

namespace kiln::cpu {
namespace {

const double kTermError =
    2 * std::ldexp(1.0, -8) + std::ldexp(1.0, -16) + 5000 * std::ldexp(1.0, -24);

struct Case {
  std::string name;
  int64_t n, ci, co;
  std::vector<int64_t> image, kernel, strides, pads, outputPadding;  // pads: begins, then ends
};

std::vector<int64_t> outputShape(const Case& t) {
  std::vector<int64_t> out;
  const size_t d = t.image.size();
  for (size_t i = 0; i < d; ++i)
    out.push_back((t.image[i] - 1) * t.strides[i] + t.kernel[i] - t.pads[i] - t.pads[d + i] +
                  t.outputPadding[i]);
  return out;
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// y = b + sum over ci and taps of x * w (ConvTranspose, group 1, dilation 1), in double.
std::vector<double> reference(const Case& t, const std::vector<float>& x,
                              const std::vector<float>& w, const std::vector<float>& b,
                              bool magnitudes) {
  const std::vector<int64_t> out = outputShape(t);
  const size_t d = t.image.size();
  const int64_t inSize = product(t.image), outSize = product(out), taps = product(t.kernel);
  std::vector<double> y(static_cast<size_t>(t.n * t.co * outSize));
  for (int64_t n = 0; n < t.n; ++n)
    for (int64_t o = 0; o < t.co; ++o)
      for (int64_t q = 0; q < outSize; ++q)
        y[static_cast<size_t>((n * t.co + o) * outSize + q)] = magnitudes ? std::fabs(b[o]) : b[o];
  for (int64_t n = 0; n < t.n; ++n)
    for (int64_t c = 0; c < t.ci; ++c)
      for (int64_t i = 0; i < inSize; ++i)
        for (int64_t o = 0; o < t.co; ++o)
          for (int64_t k = 0; k < taps; ++k) {
            int64_t at = 0, ii = i, kk = k;
            bool inside = true;
            std::vector<int64_t> iCoord(d), kCoord(d);
            for (size_t a = d; a-- > 0;) {
              iCoord[a] = ii % t.image[a];
              ii /= t.image[a];
              kCoord[a] = kk % t.kernel[a];
              kk /= t.kernel[a];
            }
            for (size_t a = 0; a < d; ++a) {
              const int64_t p = iCoord[a] * t.strides[a] - t.pads[a] + kCoord[a];
              if (p < 0 || p >= out[a]) inside = false;
              at = at * out[a] + p;
            }
            if (!inside) continue;
            const double xv = x[static_cast<size_t>((n * t.ci + c) * inSize + i)];
            const double wv = w[static_cast<size_t>((c * t.co + o) * taps + k)];
            y[static_cast<size_t>((n * t.co + o) * outSize + at)] +=
                magnitudes ? std::fabs(xv * wv) : xv * wv;
          }
  return y;
}

ir::Node convTransposeNode(const Case& t, bool bf16) {
  ir::Node node;
  node.name = "up";
  node.opType = "ConvTranspose";
  node.opset = 11;
  node.attrs["kernel_shape"] = t.kernel;
  node.attrs["strides"] = t.strides;
  node.attrs["pads"] = t.pads;
  node.attrs["output_padding"] = t.outputPadding;
  if (bf16) node.attrs[ir::kPrecisionAttr] = std::string("bf16");
  node.inputs = {0, 1, 2};
  node.outputs = {3};
  return node;
}

struct Made {
  KernelSelection selection;
  Kernel kernel;
};

// The kernel the registry makes for the node over these tensors.
Made make(const ir::Node& node, const Tensor& x, const Tensor& w, const Tensor& b,
          const KernelState* saved = nullptr) {
  const ir::TypeInfo xt{DataType::kFloat32, ir::symShapeOf(x.shape())},
      wt{DataType::kFloat32, ir::symShapeOf(w.shape())},
      bt{DataType::kFloat32, ir::symShapeOf(b.shape())};
  const KernelCreateInfo info{node, {&xt, &wt, &bt}, {nullptr, &w, &b}, {}};
  Made m;
  m.selection = KernelRegistry::global().select(info);
  if (m.selection.chosen)
    m.kernel = saved ? m.selection.chosen->restore(info, *saved) : m.selection.chosen->create(info);
  return m;
}

class Bf16ConvTranspose : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!cpuSupports(CpuIsa::kAvx512Bf16)) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  }
};

TEST_P(Bf16ConvTranspose, MatchesDirectLoopWithinBf16Bound) {
  kiln::testing::ScopedThreads threads(GetParam());
  const std::vector<Case> cases{
      {"upsample x2, kernel 4, pad 1", 1, 32, 16, {7, 9}, {4, 4}, {2, 2}, {1, 1, 1, 1}, {0, 0}},
      {"stride 1, kernel 3, output_padding",
       2,
       20,
       24,
       {6, 5},
       {3, 3},
       {2, 1},
       {0, 1, 1, 0},
       {1, 0}},
      {"pointwise (Y written by the GEMM)",
       1,
       48,
       40,
       {5, 6},
       {1, 1},
       {1, 1},
       {0, 0, 0, 0},
       {0, 0}},
      {"1-D, kernel 5, stride 3", 2, 17, 9, {11}, {5}, {3}, {2, 1}, {0}},
  };
  const ir::OpSchema* schema = ir::OpSchemaRegistry::global().find("", "ConvTranspose", 11);
  ASSERT_NE(schema, nullptr);
  for (const Case& t : cases) {
    SCOPED_TRACE(t.name);
    std::vector<int64_t> xShape{t.n, t.ci}, wShape{t.ci, t.co};
    xShape.insert(xShape.end(), t.image.begin(), t.image.end());
    wShape.insert(wShape.end(), t.kernel.begin(), t.kernel.end());
    const std::vector<float> xv = kiln::testing::randomFloats(product(xShape), 1),
                             wv = kiln::testing::randomFloats(product(wShape), 2),
                             bv = kiln::testing::randomFloats(t.co, 3);
    const Tensor x = Tensor::fromVector<float>(DataType::kFloat32, xShape, xv),
                 w = Tensor::fromVector<float>(DataType::kFloat32, wShape, wv),
                 b = Tensor::fromVector<float>(DataType::kFloat32, {t.co}, bv);
    const ir::Node node = convTransposeNode(t, true);
    const Made m = make(node, x, w, b);
    ASSERT_NE(m.selection.chosen, nullptr);
    EXPECT_EQ(m.selection.chosen->id, "bf16_conv_transpose_gemm_avx512bf16");
    // Run it as made, and restored from its saved state (a plan's round trip).
    const KernelState state = m.kernel.save();
    const Made restored = make(node, x, w, b, &state);
    const std::vector<double> want = reference(t, xv, wv, bv, false),
                              size = reference(t, xv, wv, bv, true);
    for (const Kernel* k : {&m.kernel, &restored.kernel}) {
      const std::vector<Tensor> y = runNode(node, *schema, k->run, {&x, &w, &b});
      ASSERT_EQ(static_cast<size_t>(y[0].numel()), want.size());
      const float* got = y[0].data<float>();
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_LE(std::fabs(got[i] - want[i]), kTermError * size[i] + 1e-6)
            << "at " << i << ": " << got[i] << " vs " << want[i];
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, Bf16ConvTranspose, ::testing::Values(1, 2));

TEST(Bf16ConvTransposeSelection, DeclinesUnmarkedAndGroupedLayers) {
  const Case t{"", 1, 8, 8, {4, 4}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {0, 0}};
  const Tensor x = Tensor::fromVector<float>(DataType::kFloat32, {1, 8, 4, 4},
                                             kiln::testing::randomFloats(128, 4));
  const Tensor w = Tensor::fromVector<float>(DataType::kFloat32, {8, 8, 2, 2},
                                             kiln::testing::randomFloats(256, 5));
  const Tensor b =
      Tensor::fromVector<float>(DataType::kFloat32, {8}, kiln::testing::randomFloats(8, 6));
  const Made unmarked = make(convTransposeNode(t, false), x, w, b);
  ASSERT_NE(unmarked.selection.chosen, nullptr);
  EXPECT_EQ(unmarked.selection.chosen->id, "any_conv_transpose_generic");
  ASSERT_FALSE(unmarked.selection.declined.empty());
  EXPECT_EQ(unmarked.selection.declined[0].first, "bf16_conv_transpose_gemm_avx512bf16");
  if (!cpuSupports(CpuIsa::kAvx512Bf16)) return;  // declined as "needs avx512bf16" there
  EXPECT_EQ(unmarked.selection.declined[0].second,
            "the layer computes in its tensors' type, not bf16");
  ir::Node grouped = convTransposeNode(t, true);
  grouped.attrs["group"] = int64_t{2};
  const Tensor wg = Tensor::fromVector<float>(DataType::kFloat32, {8, 4, 2, 2},
                                              kiln::testing::randomFloats(128, 7));
  const Made g = make(grouped, x, wg, b);
  ASSERT_FALSE(g.selection.declined.empty());
  EXPECT_EQ(g.selection.declined[0].second, "grouped (takes group 1)");
}

}  // namespace
}  // namespace kiln::cpu
