// The blocked pool kernels (backends/cpu/kernels/nchwc_pool.cpp) run directly on [N, Cb, H, W, 16]
// inputs against naive references written here: the global pools on the AVX2 and AVX-512 paths
// (mean of each lane computed in double), and 3x3 stride-2 max pooling at SqueezeNet's odd sizes
// with and without padding. (nchwc_layout_test.cpp compares them with the plain pools too.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "random_data.h"
#include "single_node_model.h"

namespace kiln {
namespace {

using testing::randomFloats;
using testing::SingleNodeModel;

constexpr int64_t kLanes = 16;

Tensor blockedInput(int64_t n, int64_t cb, int64_t h, int64_t w, uint32_t seed) {
  const Shape shape = {n, cb, h, w, kLanes};
  return Tensor::fromVector(DataType::kFloat32, shape,
                            randomFloats(shapeNumel(shape), seed, -3.0f, 5.0f));
}

TEST(NchwcPoolKernel, GlobalPoolsMatchTheReferenceOnEachIsa) {
  const Tensor x = blockedInput(2, 3, 14, 13, 5);  // an odd pixel count: the even/odd sums' tail
  const int64_t planes = 6, pixels = 14 * 13;
  for (cpu::CpuIsa isa : {cpu::CpuIsa::kAvx2, cpu::CpuIsa::kAvx512}) {
    if (isa > cpu::detectedCpuIsa()) continue;
    cpu::ScopedCpuIsaLimit limit(isa);
    SCOPED_TRACE(cpu::cpuIsaName(isa));
    const Tensor mean = SingleNodeModel("NchwcGlobalAveragePool", 1, "kiln")
                            .input("x", x)
                            .output("y")
                            .run()[0]
                            .second;
    const Tensor max =
        SingleNodeModel("NchwcGlobalMaxPool", 1, "kiln").input("x", x).output("y").run()[0].second;
    ASSERT_EQ(mean.shape(), (Shape{2, 3, 1, 1, kLanes}));
    ASSERT_EQ(max.shape(), (Shape{2, 3, 1, 1, kLanes}));
    for (int64_t p = 0; p < planes; ++p) {
      for (int64_t c = 0; c < kLanes; ++c) {
        double sum = 0;
        float biggest = std::numeric_limits<float>::lowest();
        for (int64_t i = 0; i < pixels; ++i) {
          const float v = x.data<float>()[(p * pixels + i) * kLanes + c];
          sum += v;
          biggest = std::max(biggest, v);
        }
        const int64_t at = p * kLanes + c;
        EXPECT_FLOAT_EQ(mean.data<float>()[at], static_cast<float>(sum / pixels))
            << "plane " << p << " lane " << c;
        EXPECT_EQ(max.data<float>()[at], biggest) << "plane " << p << " lane " << c;
      }
    }
  }
}

// Naive blocked max pooling, 3x3 stride 2, with `pad` on every side; windows never lie wholly in
// the padding at these sizes.
std::vector<float> maxPoolReference(const Tensor& x, int64_t pad, int64_t outH, int64_t outW) {
  const int64_t planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3);
  std::vector<float> y(static_cast<size_t>(planes * outH * outW * kLanes));
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oh = 0; oh < outH; ++oh)
      for (int64_t ow = 0; ow < outW; ++ow)
        for (int64_t c = 0; c < kLanes; ++c) {
          float m = std::numeric_limits<float>::lowest();
          for (int64_t kh = 0; kh < 3; ++kh)
            for (int64_t kw = 0; kw < 3; ++kw) {
              const int64_t ih = oh * 2 + kh - pad, iw = ow * 2 + kw - pad;
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              m = std::max(m, x.data<float>()[((p * h + ih) * w + iw) * kLanes + c]);
            }
          y[static_cast<size_t>(((p * outH + oh) * outW + ow) * kLanes + c)] = m;
        }
  return y;
}

TEST(NchwcPoolKernel, MaxPoolThreeByThreeStrideTwoMatchesTheReference) {
  const Tensor x = blockedInput(1, 4, 23, 21, 8);
  for (int64_t pad : {0, 1}) {
    SCOPED_TRACE("pad " + std::to_string(pad));
    const Tensor y = SingleNodeModel("NchwcMaxPool", 1, "kiln")
                         .attr("kernel_shape", std::vector<int64_t>{3, 3})
                         .attr("strides", std::vector<int64_t>{2, 2})
                         .attr("pads", std::vector<int64_t>{pad, pad, pad, pad})
                         .input("x", x)
                         .output("y")
                         .run()[0]
                         .second;
    const int64_t outH = (23 + 2 * pad - 3) / 2 + 1, outW = (21 + 2 * pad - 3) / 2 + 1;
    ASSERT_EQ(y.shape(), (Shape{1, 4, outH, outW, kLanes}));
    EXPECT_EQ(testing::valuesOf<float>(y), maxPoolReference(x, pad, outH, outW));
  }
}

}  // namespace
}  // namespace kiln
