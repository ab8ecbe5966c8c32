// CPU kernels of com.microsoft's token and sequence ops (ir/ops/contrib_sequence_ops.cpp), each
// as onnxruntime's CPU kernel defines it:
//   NGramRepeatBlock     scores of the tokens that would repeat an n-gram of input_ids set to -inf
//   BifurcationDetector  cur_tokens plus pred_tokens up to where they leave src_tokens (from
//                        prev_suffix_match_idx), then the end in src_tokens of the one occurrence
//                        of the output's last n tokens (n from min to max ngram size), or -1
//   DynamicTimeWarping   the cheapest monotone path through the cost matrix, as [2, steps]
//   WordConvEmbedding    per word: char embeddings, a 1-D convolution over the chars, tanh, max
//                        over the windows within the word's length (at least one window)
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/kernels/node_label.h"

namespace kiln::cpu {
namespace {

void ngramRepeatBlockKernel(KernelContext& ctx, int64_t n) {
  const Tensor& ids = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  if (ids.rank() != 2 || scores.rank() != 2 || scores.dim(0) != ids.dim(0))
    ctx.fail("input_ids [batch, length] and scores [batch, vocab] expected, got " + ids.describe() +
                 " and " + scores.describe(),
             ErrorCode::kInvalidArgument);
  const int64_t batch = ids.dim(0), len = ids.dim(1), vocab = scores.dim(1);
  Tensor y = scores.clone();
  const int64_t* id = ids.data<int64_t>();
  float* out = y.data<float>();
  for (int64_t b = 0; b < batch && len + 1 >= n; ++b) {
    const int64_t* row = id + b * len;
    const int64_t* tail = row + len + 1 - n;  // the last n - 1 tokens
    for (int64_t i = 0; i + n <= len; ++i) {
      if (!std::equal(row + i, row + i + n - 1, tail)) continue;
      const int64_t token = row[i + n - 1];
      if (token < 0 || token >= vocab)
        ctx.fail("input_ids[" + std::to_string(b) + ", " + std::to_string(i + n - 1) +
                     "] = " + std::to_string(token) + " is out of range for a vocabulary of " +
                     std::to_string(vocab),
                 ErrorCode::kInvalidArgument);
      out[b * vocab + token] = -std::numeric_limits<float>::infinity();
    }
  }
  ctx.setOutput(0, y);
}

struct NgramRange {
  int64_t min = 1, max = 3;
};

void bifurcationDetectorKernel(KernelContext& ctx, NgramRange grams) {
  const Tensor& src = ctx.input(0);
  const Tensor& cur = ctx.input(1);
  const Tensor& prevIdx = ctx.input(2);
  const int64_t srcLen = src.numel(), curLen = cur.numel();
  const int64_t* s = src.data<int64_t>();
  std::vector<int64_t> tokens(cur.data<int64_t>(), cur.data<int64_t>() + curLen);
  if (ctx.hasInput(3)) {
    const Tensor& pred = ctx.input(3);
    if (prevIdx.numel() != 1)
      ctx.fail("prev_suffix_match_idx must hold one value, got " + prevIdx.describe(),
               ErrorCode::kInvalidArgument);
    const int64_t prev = prevIdx.data<int64_t>()[0];
    if (prev < 0 || prev > srcLen || pred.numel() != srcLen + 1 - prev)
      ctx.fail("pred_tokens " + pred.describe() + " must hold src_tokens' length + 1 - " +
                   "prev_suffix_match_idx (" + std::to_string(prev) + ", in [0, " +
                   std::to_string(srcLen) + "]) tokens",
               ErrorCode::kInvalidArgument);
    const int64_t* p = pred.data<int64_t>();
    int64_t split = 0;
    while (split < srcLen - prev && p[split] == s[split + prev]) ++split;
    tokens.insert(tokens.end(), p, p + split + 1);
  }
  const auto len = static_cast<int64_t>(tokens.size());
  int64_t suffix = -1;
  for (int64_t n = grams.min; n <= grams.max && n <= len; ++n) {
    const int64_t* gram = tokens.data() + len - n;
    const int64_t* found = std::search(s, s + srcLen, gram, gram + n);
    if (found == s + srcLen) break;
    suffix = (found - s) + n;
    if (suffix >= srcLen) break;
    if (std::search(found + 1, s + srcLen, gram, gram + n) != s + srcLen) suffix = -1;
  }
  Tensor& out = ctx.allocateOutput(0, DataType::kInt64, {len});
  std::copy(tokens.begin(), tokens.end(), out.data<int64_t>());
  if (ctx.wantsOutput(1)) {
    Tensor& idx = ctx.allocateOutput(1, DataType::kInt64, prevIdx.shape());
    std::fill(idx.data<int64_t>(), idx.data<int64_t>() + idx.numel(), suffix);
  }
}

void dynamicTimeWarpingKernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  if (!(in.rank() == 2 || (in.rank() == 3 && in.dim(0) == 1)))
    ctx.fail("input must be [M, N] or [1, M, N], got " + in.describe(),
             ErrorCode::kInvalidArgument);
  const int64_t rows = in.dim(in.rank() - 2), cols = in.dim(in.rank() - 1);
  const float* c = in.data<float>();
  // cost[i][j]: the cheapest path to (i - 1, j - 1); step[i][j]: 0 diagonal, 1 from above, 2 from
  // the left. Ties go to the left move, then up, as onnxruntime breaks them.
  const int64_t w = cols + 1;
  std::vector<float> cost(static_cast<size_t>((rows + 1) * w),
                          std::numeric_limits<float>::infinity());
  std::vector<int8_t> step(cost.size(), -1);
  cost[0] = 0;
  for (int64_t j = 1; j <= cols; ++j) {
    for (int64_t i = 1; i <= rows; ++i) {
      const float diag = cost[(i - 1) * w + j - 1], up = cost[(i - 1) * w + j],
                  left = cost[i * w + j - 1];
      int8_t s = 2;
      float best = left;
      if (diag < up && diag < left) {
        s = 0;
        best = diag;
      } else if (up < diag && up < left) {
        s = 1;
        best = up;
      }
      cost[i * w + j] = best + c[(i - 1) * cols + j - 1];
      step[i * w + j] = s;
    }
  }
  std::vector<std::pair<int32_t, int32_t>> path;
  for (int64_t i = rows, j = cols; i > 0 && j > 0;) {
    path.emplace_back(static_cast<int32_t>(i - 1), static_cast<int32_t>(j - 1));
    const int8_t s = step[i * w + j];
    if (s != 1) --j;
    if (s != 2) --i;
  }
  const auto steps = static_cast<int64_t>(path.size());
  int32_t* out = ctx.allocateOutput(0, DataType::kInt32, {2, steps}).data<int32_t>();
  for (int64_t k = 0; k < steps; ++k) {
    out[k] = path[steps - 1 - k].first;
    out[steps + k] = path[steps - 1 - k].second;
  }
}

void wordConvEmbeddingKernel(KernelContext& ctx) {
  const Tensor& seq = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& bias = ctx.input(2);
  const Tensor& table = ctx.input(3);
  if (seq.rank() != 2 || w.rank() != 4 || table.rank() != 2 || bias.numel() != w.dim(0) ||
      w.dim(1) != 1 || w.dim(3) != table.dim(1))
    ctx.fail(
        "Sequence [words, chars], W [filters, 1, window, char_embedding], B [filters] and C "
        "[chars, char_embedding] expected, got " +
            seq.describe() + ", " + w.describe() + ", " + bias.describe() + " and " +
            table.describe(),
        ErrorCode::kInvalidArgument);
  const int64_t words = seq.dim(0), chars = seq.dim(1);
  const int64_t filters = w.dim(0), window = w.dim(2), dim = table.dim(1), rows = table.dim(0);
  if (window > chars)
    ctx.fail("the convolution window " + std::to_string(window) + " is longer than the " +
                 std::to_string(chars) + " chars of a word",
             ErrorCode::kInvalidArgument);
  const int32_t* ids = seq.data<int32_t>();
  const float* pw = w.data<float>();
  const float* pb = bias.data<float>();
  const float* pc = table.data<float>();
  Tensor& y = ctx.output(0);
  float* out = y.data<float>();
  std::vector<float> embedded(static_cast<size_t>(chars * dim));
  for (int64_t s = 0; s < words; ++s) {
    const int32_t* word = ids + s * chars;
    float* res = out + s * filters;
    // A word's length: its chars > 0, or 0 when its first char is not; an empty word's row is 0
    // (onnxruntime leaves it unset).
    const int64_t len =
        word[0] > 0 ? std::count_if(word, word + chars, [](int32_t c) { return c > 0; }) : 0;
    if (len == 0) {
      std::fill(res, res + filters, 0.0f);
      continue;
    }
    // The first max(len, window) chars' embeddings; a char outside C's rows embeds as zeros.
    const int64_t span = std::max(len, window);
    std::fill(embedded.begin(), embedded.end(), 0.0f);
    for (int64_t k = 0; k < span; ++k)
      if (word[k] >= 0 && word[k] < rows)
        std::copy(pc + word[k] * dim, pc + (word[k] + 1) * dim, embedded.begin() + k * dim);
    std::fill(res, res + filters, -1e12f);
    for (int64_t j = 0; j + window <= span; ++j) {
      const float* x = embedded.data() + j * dim;  // window * dim contiguous values
      for (int64_t f = 0; f < filters; ++f) {
        const float* wf = pw + f * window * dim;
        float acc = 0;
        for (int64_t q = 0; q < window * dim; ++q) acc += x[q] * wf[q];
        res[f] = std::max(res[f], std::tanh(acc + pb[f]));
      }
    }
  }
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN(
    "com.microsoft", "NGramRepeatBlock",
    bindKernel([](const ir::Node& node) { return ir::attrInt(node, "ngram_size"); },
               ngramRepeatBlockKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "BifurcationDetector",
                                bindKernel(
                                    [](const ir::Node& node) {
                                      return NgramRange{ir::attrInt(node, "min_ngram_size", 1),
                                                        ir::attrInt(node, "max_ngram_size", 3)};
                                    },
                                    bifurcationDetectorKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "DynamicTimeWarping",
                                KernelFn(dynamicTimeWarpingKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "WordConvEmbedding",
                                KernelFn(wordConvEmbeddingKernel));

}  // namespace kiln::cpu
