// The smaller com.microsoft ops (backends/cpu/kernels/contrib_misc.cpp, contrib_sequence_ops.cpp,
// contrib_tokenizer.cpp, contrib_onnx_equivalents.cpp) on small cases worked out by hand (and
// checked against onnxruntime 1.32); tests/python/test_contrib_misc_ops.py compares them with
// onnxruntime on generated cases.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "single_node_model.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace kiln::testing;

constexpr const char* kMs = "com.microsoft";

Tensor int64s(Shape shape, std::vector<int64_t> v) {
  return Tensor::fromVector<int64_t>(DataType::kInt64, std::move(shape), v);
}

Tensor strings(Shape shape, const std::vector<std::string>& v) {
  Tensor t(DataType::kString, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.data<std::string>()[i] = v[i];
  return t;
}

// MurmurHash3_x86_32's published values for "", "a" and "hello" with seed 0.
TEST(ContribMisc, MurmurHash3OfStrings) {
  auto y = SingleNodeModel("MurmurHash3", 1, kMs)
               .attr("seed", int64_t{0})
               .input("x", strings({3}, {"", "a", "hello"}))
               .output("y", DataType::kUint32)
               .run();
  EXPECT_THAT(valuesOf<uint32_t>(y[0].second), ElementsAre(0u, 0x3C2569B2u, 0x248BFA47u));
}

// Costs [[1, 2, 5], [3, 1, 1], [4, 4, 1]]: the diagonal (cost 3) is the cheapest path.
TEST(ContribMisc, DynamicTimeWarpingTakesTheDiagonal) {
  auto y = SingleNodeModel("DynamicTimeWarping", 1, kMs)
               .input("cost", Tensor::fromVector<float>(DataType::kFloat32, {3, 3},
                                                        {1, 2, 5, 3, 1, 1, 4, 4, 1}))
               .output("path", DataType::kInt32)
               .run();
  EXPECT_EQ(y[0].second.shape(), (Shape{2, 3}));
  EXPECT_THAT(valuesOf<int32_t>(y[0].second), ElementsAre(0, 1, 2, 0, 1, 2));
}

// pred_tokens agrees with src_tokens from index 1 for three tokens: cur + those three + the
// first that differs; the last token (8) is nowhere in src_tokens, so no suffix match.
TEST(ContribMisc, BifurcationDetectorAppendsUpToTheFirstDifference) {
  auto y = SingleNodeModel("BifurcationDetector", 1, kMs)
               .input("src", int64s({6}, {4, 5, 6, 4, 5, 7}))
               .input("cur", int64s({2}, {9, 4}))
               .input("prev", int64s({}, {1}))
               .input("pred", int64s({6}, {5, 6, 4, 8, 1, 2}))
               .output("tokens", DataType::kInt64)
               .output("suffix", DataType::kInt64)
               .run();
  EXPECT_THAT(valuesOf<int64_t>(y[0].second), ElementsAre(9, 4, 5, 6, 4, 8));
  EXPECT_THAT(valuesOf<int64_t>(y[1].second), ElementsAre(-1));
}

// [1, 2, 1, 2, 1] ends in the 2-gram (2, 1), seen once before, followed by 2: 2 is banned.
TEST(ContribMisc, NGramRepeatBlockBansTheTokenThatRepeatsATrigram) {
  auto y = SingleNodeModel("NGramRepeatBlock", 1, kMs)
               .attr("ngram_size", int64_t{3})
               .input("ids", int64s({1, 5}, {1, 2, 1, 2, 1}))
               .input("scores", Tensor::fromVector<float>(DataType::kFloat32, {1, 4}, {0, 0, 0, 0}))
               .output("out")
               .run();
  const std::vector<float> s = valuesOf<float>(y[0].second);
  EXPECT_EQ(s[0], 0.0f);
  EXPECT_EQ(s[1], 0.0f);
  EXPECT_TRUE(std::isinf(s[2]) && s[2] < 0);
  EXPECT_EQ(s[3], 0.0f);
}

TEST(ContribMisc, TokenizerPadsAfterTheEndMark) {
  auto y = SingleNodeModel("Tokenizer", 1, kMs)
               .attr("mark", int64_t{1})
               .attr("mincharnum", int64_t{1})
               .attr("pad_value", "#")
               .attr("separators", std::vector<std::string>{" "})
               .input("x", strings({2}, {"a bc", "d"}))
               .output("y", DataType::kString)
               .run();
  EXPECT_EQ(y[0].second.shape(), (Shape{2, 4}));
  EXPECT_THAT(valuesOf<std::string>(y[0].second),
              ElementsAre("\x02", "a", "bc", "\x03", "\x02", "d", "\x03", "#"));
}

// First-occurrence order; NaN equals NaN (numpy's unique).
TEST(ContribMisc, UniqueKeepsFirstOccurrenceOrder) {
  const float nan = std::nanf("");
  auto y = SingleNodeModel("Unique", 1, kMs)
               .input("x", Tensor::fromVector<float>(DataType::kFloat32, {5}, {nan, 1, nan, 0, 1}))
               .output("y")
               .output("idx", DataType::kInt64)
               .output("counts", DataType::kInt64)
               .run();
  const std::vector<float> values = valuesOf<float>(y[0].second);
  ASSERT_EQ(values.size(), 3u);
  EXPECT_TRUE(std::isnan(values[0]));
  EXPECT_EQ(values[1], 1.0f);
  EXPECT_EQ(values[2], 0.0f);
  EXPECT_THAT(valuesOf<int64_t>(y[1].second), ElementsAre(0, 1, 0, 2, 1));
  EXPECT_THAT(valuesOf<int64_t>(y[2].second), ElementsAre(2, 2, 1));
}

TEST(ContribMisc, CropAndResizeRefusesABatchIndexPastTheImages) {
  SingleNodeModel model("CropAndResize", 1, kMs);
  model.input("x", Tensor(DataType::kFloat32, {1, 1, 4, 4}))
      .input("rois", Tensor::fromVector<float>(DataType::kFloat32, {1, 4}, {0, 0, 1, 1}))
      .input("batch", Tensor::fromVector<int32_t>(DataType::kInt32, {1}, {1}))
      .input("size", Tensor::fromVector<int32_t>(DataType::kInt32, {2}, {2, 2}))
      .output("y");
  try {
    model.run();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("CropAndResize_under_test"));
    EXPECT_THAT(e.what(), HasSubstr("batch_indices[0] = 1 is out of range for 1 images"));
  }
}

}  // namespace
}  // namespace kiln
