// DFT, STFT, the window functions and MelWeightMatrix against hand-computed values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "single_node_model.h"

namespace kiln {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::FloatNear;
using ::testing::Pointwise;
using namespace kiln::testing;

Tensor floats(Shape shape, std::vector<float> v) {
  return Tensor::fromVector<float>(DataType::kFloat32, std::move(shape), v);
}
Tensor scalarInt64(int64_t v) { return Tensor::fromVector<int64_t>(DataType::kInt64, {}, {v}); }

MATCHER(Near, "") { return std::abs(std::get<0>(arg) - std::get<1>(arg)) < 1e-5; }

// DFT of the real signal [1, 2, 3, 4]: [10, -2 + 2i, -2, -2 - 2i].
TEST(Dft, RealSignalFullAndOneSided) {
  const Tensor x = floats({1, 4, 1}, {1, 2, 3, 4});
  auto full = SingleNodeModel("DFT", 17).input("x", x).output("y").run();
  EXPECT_EQ(full[0].second.shape(), (Shape{1, 4, 2}));
  EXPECT_THAT(valuesOf<float>(full[0].second),
              Pointwise(Near(), std::vector<float>{10, 0, -2, 2, -2, 0, -2, -2}));
  auto half =
      SingleNodeModel("DFT", 17).attr("onesided", int64_t{1}).input("x", x).output("y").run();
  EXPECT_EQ(half[0].second.shape(), (Shape{1, 3, 2}));
  EXPECT_THAT(valuesOf<float>(half[0].second),
              Pointwise(Near(), std::vector<float>{10, 0, -2, 2, -2, 0}));
}

TEST(Dft, InverseAndInverseOneSidedAtOpset20) {
  const Tensor spectrum = floats({1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2});
  auto inv = SingleNodeModel("DFT", 20)
                 .attr("inverse", int64_t{1})
                 .input("x", spectrum)
                 .skipInput()
                 .input("axis", scalarInt64(1))
                 .output("y")
                 .run();
  EXPECT_EQ(inv[0].second.shape(), (Shape{1, 4, 2}));
  EXPECT_THAT(valuesOf<float>(inv[0].second),
              Pointwise(Near(), std::vector<float>{1, 0, 2, 0, 3, 0, 4, 0}));
  // Inverse one-sided: three bins of half a spectrum -> a real signal of 2 * (3 - 1) samples.
  auto irfft = SingleNodeModel("DFT", 20)
                   .attr("inverse", int64_t{1})
                   .attr("onesided", int64_t{1})
                   .input("x", floats({1, 3, 2}, {10, 0, -2, 2, -2, 0}))
                   .skipInput()
                   .input("axis", scalarInt64(-2))
                   .output("y")
                   .run();
  EXPECT_EQ(irfft[0].second.shape(), (Shape{1, 4, 1}));
  EXPECT_THAT(valuesOf<float>(irfft[0].second), Pointwise(Near(), std::vector<float>{1, 2, 3, 4}));
}

TEST(Dft, DftLengthPadsWithZeros) {
  // [1, 2] padded to 4: [3, 1 - 2i, -1, 1 + 2i].
  auto y = SingleNodeModel("DFT", 17)
               .input("x", floats({1, 2, 1}, {1, 2}))
               .input("n", scalarInt64(4))
               .output("y")
               .run();
  EXPECT_EQ(y[0].second.shape(), (Shape{1, 4, 2}));
  EXPECT_THAT(valuesOf<float>(y[0].second),
              Pointwise(Near(), std::vector<float>{3, 0, 1, -2, -1, 0, 1, 2}));
}

// Frames [0 1 2 3] and [4 5 6 7]: one-sided spectra [6, -2 + 2i, -2] and [22, -2 + 2i, -2].
TEST(Stft, FramesWithStepAndLength) {
  auto y = SingleNodeModel("STFT", 17)
               .input("signal", floats({1, 8, 1}, {0, 1, 2, 3, 4, 5, 6, 7}))
               .input("step", scalarInt64(4))
               .skipInput()
               .input("length", scalarInt64(4))
               .output("y")
               .run();
  EXPECT_EQ(y[0].second.shape(), (Shape{1, 2, 3, 2}));
  EXPECT_THAT(valuesOf<float>(y[0].second),
              Pointwise(Near(), std::vector<float>{6, 0, -2, 2, -2, 0, 22, 0, -2, 2, -2, 0}));
  // A window scales each frame's samples: [0, 1, 1, 0] keeps samples 1 and 2.
  auto w = SingleNodeModel("STFT", 17)
               .input("signal", floats({1, 8, 1}, {0, 1, 2, 3, 4, 5, 6, 7}))
               .input("step", scalarInt64(4))
               .input("window", floats({4}, {0, 1, 1, 0}))
               .output("y")
               .run();
  EXPECT_THAT(valuesOf<float>(w[0].second),
              Pointwise(Near(), std::vector<float>{3, 0, -2, -1, 1, 0, 11, 0, -6, -5, 1, 0}));
}

std::vector<double> window(const char* op, int64_t size, int64_t periodic) {
  auto y = SingleNodeModel(op, 17)
               .attr("periodic", periodic)
               .attr("output_datatype", int64_t{11})
               .input("size", scalarInt64(size))
               .output("y", DataType::kFloat64)
               .run();
  EXPECT_EQ(y[0].second.dtype(), DataType::kFloat64);
  return valuesOf<double>(y[0].second);
}

TEST(Windows, PeriodicAndSymmetric) {
  const double e = 1e-12;
  EXPECT_THAT(window("HannWindow", 4, 1), ElementsAre(DoubleNear(0, e), DoubleNear(0.5, e),
                                                      DoubleNear(1, e), DoubleNear(0.5, e)));
  EXPECT_THAT(window("HannWindow", 5, 0),
              ElementsAre(DoubleNear(0, e), DoubleNear(0.5, e), DoubleNear(1, e),
                          DoubleNear(0.5, e), DoubleNear(0, e)));
  EXPECT_THAT(window("HammingWindow", 4, 1),
              ElementsAre(DoubleNear(4.0 / 46, e), DoubleNear(25.0 / 46, e), DoubleNear(1, e),
                          DoubleNear(25.0 / 46, e)));
  EXPECT_THAT(window("BlackmanWindow", 4, 1), ElementsAre(DoubleNear(0, e), DoubleNear(0.34, e),
                                                          DoubleNear(1, e), DoubleNear(0.34, e)));
}

// 2 mel bins over 8-point DFTs at 8 kHz from 0 to 4 kHz: the 4 triangle edges land on DFT bins
// [0, 0, 1, 2], so filter 0 is the spike at bin 0 and filter 1 rises from bin 0 to 1 and ends at 2.
TEST(MelWeightMatrix, TriangleFilters) {
  auto y = SingleNodeModel("MelWeightMatrix", 17)
               .input("bins", scalarInt64(2))
               .input("dft", scalarInt64(8))
               .input("rate", scalarInt64(8000))
               .input("lo", floats({}, {0}))
               .input("hi", floats({}, {4000}))
               .output("y")
               .run();
  EXPECT_EQ(y[0].second.shape(), (Shape{5, 2}));
  EXPECT_THAT(valuesOf<float>(y[0].second), ElementsAre(1, 0, 0, 1, 0, 0, 0, 0, 0, 0));
}

}  // namespace
}  // namespace kiln
