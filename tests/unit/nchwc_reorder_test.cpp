// kiln::ReorderToNchwc / ReorderFromNchwc (ir/ops/nchwc.h): element placement against the layout's
// definition, zeroed padding channels, the round trip, and shape errors named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "single_node_model.h"

namespace kiln {
namespace {

using namespace kiln::testing;

// X[n, c, h, w] = 1000 n + 100 c + 10 h + w + 1, so each value names its position.
Tensor positional(int64_t n, int64_t c, int64_t h, int64_t w) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          v.push_back(static_cast<float>(1000 * i + 100 * j + 10 * y + x + 1));
  return Tensor::fromVector<float>(DataType::kFloat32, {n, c, h, w}, v);
}

TEST(NchwcReorder, BlocksChannelsAndZeroesThePadding) {
  const Tensor x = positional(2, 20, 3, 5);
  auto out = SingleNodeModel("ReorderToNchwc", 1, "kiln").input("x", x).output("y").run();
  const Tensor& y = out[0].second;
  ASSERT_EQ(y.shape(), (Shape{2, 2, 3, 5, 16}));
  const float* py = y.data<float>();
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 32; ++c)
      for (int64_t h = 0; h < 3; ++h)
        for (int64_t w = 0; w < 5; ++w) {
          const float expected =
              c < 20 ? static_cast<float>(1000 * n + 100 * c + 10 * h + w + 1) : 0.0f;
          ASSERT_EQ(py[(((n * 2 + c / 16) * 3 + h) * 5 + w) * 16 + c % 16], expected)
              << n << " " << c << " " << h << " " << w;
        }
  auto back = SingleNodeModel("ReorderFromNchwc", 1, "kiln")
                  .attr("channels", int64_t{20})
                  .input("y", y)
                  .output("x")
                  .run();
  EXPECT_EQ(back[0].second.shape(), x.shape());
  EXPECT_EQ(valuesOf<float>(back[0].second), valuesOf<float>(x));
}

TEST(NchwcReorder, RefusesAChannelCountThatDoesNotFitTheBlocks) {
  const Tensor blocked =
      Tensor::fromVector<float>(DataType::kFloat32, {1, 2, 1, 1, 16}, std::vector<float>(32, 1.0f));
  try {
    SingleNodeModel("ReorderFromNchwc", 1, "kiln")
        .attr("channels", int64_t{40})
        .input("y", blocked)
        .output("x")
        .run();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("should hold 3 channel blocks"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("ReorderFromNchwc_under_test"));
  }
}

}  // namespace
}  // namespace kiln
