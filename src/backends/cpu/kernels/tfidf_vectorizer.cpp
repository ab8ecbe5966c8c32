// CPU kernel of TfIdfVectorizer: counts, per row of X, the n-grams of the pool that occur with
// items `skip` apart (skip = 1 .. max_skip_count + 1; unigrams only count once), then weights the
// counts (TF: count, IDF: weight if present, TFIDF: weight * count).
#include <algorithm>
#include <map>
#include <variant>

#include "backends/cpu/kernel.h"
#include "ir/shape_helpers.h"

namespace kiln::cpu {
namespace {

/// The pool as a map per n-gram length (index n - 1) from the n items to the output column.
template <typename Item>
using NgramPool = std::vector<std::map<std::vector<Item>, int64_t>>;

struct TfIdfConfig {
  int64_t minGram = 1, maxGram = 1, maxSkip = 0, outputSize = 0;
  std::string mode;
  std::vector<float> weights;
  std::variant<NgramPool<int64_t>, NgramPool<std::string>> pool;
};

template <typename Item>
NgramPool<Item> buildPool(const ir::Node& node, const std::vector<Item>& items,
                          const std::vector<int64_t>& counts, const std::vector<int64_t>& indexes,
                          int64_t maxGram) {
  NgramPool<Item> pool(static_cast<size_t>(maxGram));
  size_t ngramId = 0;
  for (size_t g = 0; g < counts.size(); ++g) {
    const auto n = static_cast<int64_t>(g + 1);
    const int64_t begin = counts[g];
    const int64_t end = g + 1 < counts.size() ? counts[g + 1] : static_cast<int64_t>(items.size());
    if (begin < 0 || end < begin || end > static_cast<int64_t>(items.size()) ||
        (end - begin) % n != 0) {
      ir::failNode(
          node, "ngram_counts does not split the pool into whole " + std::to_string(n) + "-grams");
    }
    for (int64_t at = begin; at < end; at += n, ++ngramId) {
      if (ngramId >= indexes.size())
        ir::failNode(node, "ngram_indexes has fewer entries than the pool has n-grams");
      if (n <= maxGram)
        pool[g].emplace(std::vector<Item>(items.begin() + at, items.begin() + at + n),
                        indexes[ngramId]);
    }
  }
  return pool;
}

/// Adds the counts of one row of `row` items into `freq` (outputSize entries).
template <typename Item>
void countRow(const TfIdfConfig& cfg, const NgramPool<Item>& pool, const std::vector<Item>& row,
              std::vector<int64_t>& freq) {
  const auto length = static_cast<int64_t>(row.size());
  std::vector<Item> gram;
  for (int64_t skip = 1; skip <= cfg.maxSkip + 1; ++skip) {
    // With skip > 1 a unigram is the same as with skip 1, so only longer n-grams count again.
    const int64_t minGram = skip == 1 ? cfg.minGram : std::max<int64_t>(cfg.minGram, 2);
    if (minGram > cfg.maxGram) break;
    for (int64_t start = 0; start < length; ++start) {
      gram.clear();
      for (int64_t n = 1; n <= cfg.maxGram; ++n) {
        const int64_t at = start + (n - 1) * skip;
        if (at >= length) break;
        gram.push_back(row[at]);
        if (n < minGram) continue;
        const auto& grams = pool[n - 1];
        if (auto it = grams.find(gram); it != grams.end()) ++freq[it->second];
      }
    }
  }
}

KernelFn makeTfIdfVectorizer(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  auto cfg = std::make_shared<TfIdfConfig>();
  cfg->minGram = ir::attrInt(node, "min_gram_length");
  cfg->maxGram = ir::attrInt(node, "max_gram_length");
  cfg->maxSkip = ir::attrInt(node, "max_skip_count");
  cfg->mode = ir::attrString(node, "mode");
  if (cfg->minGram < 1 || cfg->maxGram < cfg->minGram || cfg->maxSkip < 0) {
    ir::failNode(node, "need 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0");
  }
  const std::vector<int64_t> counts = ir::attrInts(node, "ngram_counts");
  const std::vector<int64_t> indexes = ir::attrInts(node, "ngram_indexes");
  if (indexes.empty()) ir::failNode(node, "ngram_indexes must not be empty");
  cfg->outputSize = *std::max_element(indexes.begin(), indexes.end()) + 1;
  for (int64_t i : indexes) {
    if (i < 0) ir::failNode(node, "ngram_indexes must not be negative");
  }
  cfg->weights = ir::attrFloats(node, "weights", {});
  if (ir::hasAttr(node, "pool_strings"))
    cfg->pool =
        buildPool(node, ir::attrStrings(node, "pool_strings"), counts, indexes, cfg->maxGram);
  else
    cfg->pool = buildPool(node, ir::attrInts(node, "pool_int64s"), counts, indexes, cfg->maxGram);

  return [cfg](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 1 && x.rank() != 2)
      ctx.fail("X must be [C] or [B, C], got " + x.describe(), ErrorCode::kInvalidArgument);
    const int64_t rows = x.rank() == 2 ? x.dim(0) : 1;
    const int64_t width = x.rank() == 2 ? x.dim(1) : x.dim(0);
    const bool strings = x.dtype() == DataType::kString;
    if (strings != std::holds_alternative<NgramPool<std::string>>(cfg->pool)) {
      ctx.fail("X of type " + dataTypeName(x.dtype()) +
                   " does not match the pool (pool_strings for strings, pool_int64s for integers)",
               ErrorCode::kInvalidArgument);
    }
    std::vector<int64_t> freq(static_cast<size_t>(rows * cfg->outputSize), 0);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int64_t> rowFreq(static_cast<size_t>(cfg->outputSize), 0);
      if (strings) {
        const std::string* p = x.data<std::string>() + r * width;
        countRow(*cfg, std::get<NgramPool<std::string>>(cfg->pool),
                 std::vector<std::string>(p, p + width), rowFreq);
      } else {
        std::vector<int64_t> row(static_cast<size_t>(width));
        for (int64_t i = 0; i < width; ++i) row[i] = x.intAt(r * width + i);
        countRow(*cfg, std::get<NgramPool<int64_t>>(cfg->pool), row, rowFreq);
      }
      std::copy(rowFreq.begin(), rowFreq.end(), freq.begin() + r * cfg->outputSize);
    }
    Tensor& y =
        ctx.allocateOutput(0, DataType::kFloat32,
                           x.rank() == 2 ? Shape{rows, cfg->outputSize} : Shape{cfg->outputSize});
    float* out = y.data<float>();
    const auto& w = cfg->weights;
    for (int64_t i = 0; i < rows * cfg->outputSize; ++i) {
      const int64_t col = i % cfg->outputSize;
      const auto f = static_cast<float>(freq[i]);
      const float weight = col < static_cast<int64_t>(w.size()) ? w[col] : 1.0f;
      if (cfg->mode == "TF")
        out[i] = f;
      else if (cfg->mode == "IDF")
        out[i] = freq[i] > 0 ? (w.empty() ? 1.0f : weight) : 0.0f;
      else
        out[i] = w.empty() ? f : weight * f;
    }
  };
}

KILN_REGISTER_CPU_KERNEL("TfIdfVectorizer", KernelFactory(makeTfIdfVectorizer));

}  // namespace
}  // namespace kiln::cpu
