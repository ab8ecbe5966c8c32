// StringNormalizer, StringConcat, StringSplit, RegexFullMatch and TfIdfVectorizer against
// hand-computed values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "single_node_model.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using namespace kiln::testing;

Tensor strings(Shape shape, const std::vector<std::string>& v) {
  Tensor t(DataType::kString, std::move(shape));
  std::copy(v.begin(), v.end(), t.data<std::string>());
  return t;
}

// Stopwords match case-insensitively by default; the kept strings are then upper-cased (UTF-8 too).
TEST(StringNormalizer, CaseInsensitiveStopwordsThenUpperCase) {
  auto out = SingleNodeModel("StringNormalizer", 10)
                 .attr("case_change_action", "UPPER")
                 .attr("stopwords", std::vector<std::string>{"monday"})
                 .input("x", strings({1, 3}, {"Monday", "tuesday", "été"}))
                 .output("y", DataType::kString)
                 .run();
  EXPECT_EQ(out[0].second.shape(), (Shape{1, 2}));
  EXPECT_THAT(valuesOf<std::string>(out[0].second), ElementsAre("TUESDAY", "ÉTÉ"));
}

TEST(StringNormalizer, OnlyStopwordsLeaveOneEmptyString) {
  auto out = SingleNodeModel("StringNormalizer", 10)
                 .attr("is_case_sensitive", int64_t{1})
                 .attr("stopwords", std::vector<std::string>{"a"})
                 .input("x", strings({2}, {"a", "a"}))
                 .output("y", DataType::kString)
                 .run();
  EXPECT_THAT(valuesOf<std::string>(out[0].second), ElementsAre(""));
}

TEST(StringConcat, Broadcasts) {
  auto out = SingleNodeModel("StringConcat", 20)
                 .input("a", strings({3}, {"cat", "dog", ""}))
                 .input("b", strings({1}, {"s"}))
                 .output("y", DataType::kString)
                 .run();
  EXPECT_THAT(valuesOf<std::string>(out[0].second), ElementsAre("cats", "dogs", "s"));
}

TEST(StringSplit, DelimiterWhitespaceAndMaxsplit) {
  auto byDash = SingleNodeModel("StringSplit", 20)
                    .attr("delimiter", "-")
                    .input("x", strings({2}, {"a--b", "c"}))
                    .output("y", DataType::kString)
                    .output("n", DataType::kInt64)
                    .run();
  EXPECT_EQ(byDash[0].second.shape(), (Shape{2, 3}));
  EXPECT_THAT(valuesOf<std::string>(byDash[0].second), ElementsAre("a", "", "b", "c", "", ""));
  EXPECT_THAT(valuesOf<int64_t>(byDash[1].second), ElementsAre(3, 1));
  auto bySpace = SingleNodeModel("StringSplit", 20)
                     .attr("maxsplit", int64_t{1})
                     .input("x", strings({1}, {"  the quick  fox "}))
                     .output("y", DataType::kString)
                     .output("n", DataType::kInt64)
                     .run();
  EXPECT_THAT(valuesOf<std::string>(bySpace[0].second), ElementsAre("the", "quick  fox"));
}

TEST(RegexFullMatch, MatchesWholeString) {
  auto out = SingleNodeModel("RegexFullMatch", 20)
                 .attr("pattern", "www\\.\\w+\\.com")
                 .input("x", strings({3}, {"www.a.com", "www.a.com/x", "http://www.a.com"}))
                 .output("y", DataType::kBool)
                 .run();
  EXPECT_THAT(valuesOf<bool>(out[0].second), ElementsAre(true, false, false));
}

// Pool: unigrams [2, 3] and the bigram [2, 3]; with skip 1 the row [2, 4, 3, 2, 3] holds the
// bigram once at positions 3-4 and, with items two apart, once more at 0-2.
TEST(TfIdfVectorizer, CountsUnigramsAndSkipBigrams) {
  auto run = [](int64_t maxSkip) {
    return SingleNodeModel("TfIdfVectorizer", 9)
        .attr("mode", "TF")
        .attr("min_gram_length", int64_t{1})
        .attr("max_gram_length", int64_t{2})
        .attr("max_skip_count", maxSkip)
        .attr("ngram_counts", std::vector<int64_t>{0, 2})
        .attr("ngram_indexes", std::vector<int64_t>{0, 1, 2})
        .attr("pool_int64s", std::vector<int64_t>{2, 3, 2, 3})
        .input("x", Tensor::fromVector<int64_t>(DataType::kInt64, {5}, {2, 4, 3, 2, 3}))
        .output("y")
        .run();
  };
  EXPECT_THAT(valuesOf<float>(run(0)[0].second), ElementsAre(2, 2, 1));
  EXPECT_THAT(valuesOf<float>(run(1)[0].second), ElementsAre(2, 2, 2));
}

}  // namespace
}  // namespace kiln
