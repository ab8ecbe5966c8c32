// GridSample, AffineGrid, Col2Im, CenterCropPad and NonMaxSuppression against hand-computed values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits>

#include "single_node_model.h"

namespace kiln {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::FloatNear;
using namespace kiln::testing;

Tensor floats(Shape shape, std::vector<float> v) {
  return Tensor::fromVector<float>(DataType::kFloat32, std::move(shape), v);
}
Tensor int64s(Shape shape, std::vector<int64_t> v) {
  return Tensor::fromVector<int64_t>(DataType::kInt64, std::move(shape), v);
}

// X = [[1, 2], [3, 4]] sampled at the image center (0, 0) and the top-left corner (-1, -1);
// without align_corners those are pixel coordinates (0.5, 0.5) and (-0.5, -0.5).
std::vector<float> gridSample(const char* mode, const char* padding, int64_t opset = 16) {
  auto y = SingleNodeModel("GridSample", opset)
               .attr("mode", mode)
               .attr("padding_mode", padding)
               .input("x", floats({1, 1, 2, 2}, {1, 2, 3, 4}))
               .input("grid", floats({1, 1, 2, 2}, {0, 0, -1, -1}))
               .output("y")
               .run();
  EXPECT_EQ(y[0].second.shape(), (Shape{1, 1, 1, 2}));
  return valuesOf<float>(y[0].second);
}

TEST(GridSample, ModesAndPadding) {
  // Bilinear at the corner with zero padding: a quarter of pixel (0, 0).
  EXPECT_THAT(gridSample("bilinear", "zeros"), ElementsAre(2.5f, 0.25f));
  EXPECT_THAT(gridSample("bilinear", "border"), ElementsAre(2.5f, 1.0f));
  EXPECT_THAT(gridSample("linear", "reflection", 20), ElementsAre(2.5f, 1.0f));
  // Nearest rounds half to even: 0.5 -> 0 and -0.5 -> -0 (pixel (0, 0)).
  EXPECT_THAT(gridSample("nearest", "zeros"), ElementsAre(1.0f, 1.0f));
}

TEST(GridSample, CubicKeepsAConstantImage) {
  auto y = SingleNodeModel("GridSample", 20)
               .attr("mode", "cubic")
               .attr("padding_mode", "border")
               .input("x", floats({1, 2, 3}, {5, 5, 5, 5, 5, 5}))
               .input("grid", floats({1, 3, 1}, {-1, 0.3f, 0.9f}))
               .output("y")
               .run();
  EXPECT_EQ(y[0].second.shape(), (Shape{1, 2, 3}));
  EXPECT_THAT(valuesOf<float>(y[0].second), Each(FloatNear(5.0f, 1e-5f)));
}

// X = [1, 2, 3, 4] (1-D, opset 20, no align_corners: grid value g is pixel x = 2 g + 1.5)
// sampled far outside: a coordinate past int64 (a fuzzer's finding: its floor was cast to int64),
// infinities and NaN.
std::vector<float> gridSampleFar(const char* padding, std::vector<float> grid) {
  const int64_t points = static_cast<int64_t>(grid.size());
  auto y = SingleNodeModel("GridSample", 20)
               .attr("mode", "linear")
               .attr("padding_mode", padding)
               .input("x", floats({1, 1, 4}, {1, 2, 3, 4}))
               .input("grid", floats({1, points, 1}, std::move(grid)))
               .output("y")
               .run();
  return valuesOf<float>(y[0].second);
}

TEST(GridSample, CoordinatesFarOutsideReadPaddingAndNonFiniteOnesReadZeros) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THAT(gridSampleFar("zeros", {1e28f, -1e28f, inf, nan}), ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(gridSampleFar("border", {1e28f, -1e28f, -inf, nan}), ElementsAre(4, 1, 0, 0));
  // Reflection about -0.5 and 3.5 (period 8): g = 3 is x = 7.5, mirrored to -0.5, whose taps -1
  // and 0 both read X[0]; g = 17 is x = 35.5, mirrored to 3.5 (taps 3 and 4 -> 3).
  EXPECT_THAT(gridSampleFar("reflection", {3, 17}), ElementsAre(1, 4));
  for (float v : gridSampleFar("reflection", {1e28f, -1e28f})) {
    EXPECT_GE(v, 1.0f);
    EXPECT_LE(v, 4.0f);
  }
}

TEST(AffineGrid, IdentityAndTranslation) {
  auto y = SingleNodeModel("AffineGrid", 20)
               .input("theta", floats({2, 2, 3}, {1, 0, 0, 0, 1, 0, 1, 0, 0.5f, 0, 1, 0}))
               .input("size", int64s({4}, {2, 1, 2, 2}))
               .output("grid")
               .run();
  EXPECT_EQ(y[0].second.shape(), (Shape{2, 2, 2, 2}));
  EXPECT_THAT(valuesOf<float>(y[0].second),
              ElementsAre(-0.5f, -0.5f, 0.5f, -0.5f, -0.5f, 0.5f, 0.5f, 0.5f,  //
                          0.0f, -0.5f, 1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 0.5f));
}

// Two 1x2 blocks over a 1x3 image overlap at the middle pixel, which sums both.
TEST(Col2Im, OverlappingBlocksSum) {
  auto y = SingleNodeModel("Col2Im", 18)
               .input("x", floats({1, 2, 2}, {1, 2, 10, 20}))
               .input("image", int64s({2}, {1, 3}))
               .input("block", int64s({2}, {1, 2}))
               .output("y")
               .run();
  EXPECT_EQ(y[0].second.shape(), (Shape{1, 1, 1, 3}));
  EXPECT_THAT(valuesOf<float>(y[0].second), ElementsAre(1, 12, 20));
}

TEST(CenterCropPad, CropsOneAxisAndPadsTheOther) {
  auto y = SingleNodeModel("CenterCropPad", 18)
               .input("x", floats({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}))
               .input("shape", int64s({2}, {2, 6}))
               .output("y")
               .run();
  EXPECT_EQ(y[0].second.shape(), (Shape{2, 6}));
  EXPECT_THAT(valuesOf<float>(y[0].second), ElementsAre(0, 0, 1, 2, 3, 0, 0, 4, 5, 6, 7, 0));
}

// Box 1 overlaps box 0 with IoU 0.9 / 1.1; box 2 is apart.
NamedTensors nms(float scoreThreshold, int64_t centerPointBox, const std::vector<float>& boxes) {
  return SingleNodeModel("NonMaxSuppression", 11)
      .attr("center_point_box", centerPointBox)
      .input("boxes", floats({1, 3, 4}, boxes))
      .input("scores", floats({1, 1, 3}, {0.9f, 0.8f, 0.7f}))
      .input("max", int64s({1}, {3}))
      .input("iou", floats({1}, {0.5f}))
      .input("score", floats({1}, {scoreThreshold}))
      .output("selected", DataType::kInt64)
      .run();
}

TEST(NonMaxSuppression, SuppressesOverlapsAndLowScores) {
  const std::vector<float> corners = {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 2, 1, 3};
  auto all = nms(0.0f, 0, corners);
  EXPECT_EQ(all[0].second.shape(), (Shape{2, 3}));
  EXPECT_THAT(valuesOf<int64_t>(all[0].second), ElementsAre(0, 0, 0, 0, 0, 2));
  auto high = nms(0.75f, 0, corners);
  EXPECT_EQ(high[0].second.shape(), (Shape{1, 3}));
  // The same boxes as [x_center, y_center, width, height].
  auto centered = nms(0.0f, 1, {0.5f, 0.5f, 1, 1, 0.6f, 0.5f, 1, 1, 2.5f, 0.5f, 1, 1});
  EXPECT_THAT(valuesOf<int64_t>(centered[0].second), ElementsAre(0, 0, 0, 0, 0, 2));
}

}  // namespace
}  // namespace kiln
