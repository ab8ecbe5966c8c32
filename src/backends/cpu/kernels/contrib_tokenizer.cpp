// CPU kernel of com.microsoft Tokenizer (ir/ops/contrib_tokenizer.cpp), as onnxruntime's kernel
// tokenizes:
// - character mode (separators [""] or tokenexp "."): every UTF-8 character is a token;
// - separators: each separator in turn splits every token so far at its matches, keeping the
//   pieces of at least mincharnum characters (no piece left ends the splitting: no tokens);
// - tokenexp: the successive matches of at least mincharnum characters are the tokens.
// A row is [start mark 0x02] tokens [end mark 0x03] then pad_value up to the longest row.
// The expressions are RE2's, as onnxruntime compiles them, in leftmost-longest mode: RE2 runs in
// time linear in the text and without recursion, so any pattern on any string is bounded.
#include <re2/re2.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/utf8.h"

namespace kiln::cpu {
namespace {

using Expression = std::shared_ptr<const re2::RE2>;

struct TokenizerParams {
  bool mark = false;
  std::string pad;
  size_t minChars = 1;
  bool charMode = false;
  std::vector<Expression> separators;  // or else one tokenexp
  std::optional<Expression> tokenexp;
};

Expression compile(const ir::Node& node, const std::string& pattern, const char* what) {
  re2::RE2::Options options;
  options.set_longest_match(true);
  options.set_log_errors(false);
  auto e = std::make_shared<const re2::RE2>(pattern, options);
  if (!e->ok()) {
    ir::failNode(node, std::string(what) + " '" + pattern +
                           "' is not a valid regular expression: " + e->error());
  }
  return e;
}

TokenizerParams tokenizerParams(const ir::Node& node) {
  TokenizerParams p;
  p.mark = ir::attrInt(node, "mark") != 0;
  p.pad = ir::attrString(node, "pad_value");
  p.minChars = static_cast<size_t>(ir::attrInt(node, "mincharnum"));
  if (ir::hasAttr(node, "separators")) {
    const std::vector<std::string> seps = ir::attrStrings(node, "separators");
    p.charMode = seps.size() == 1 && seps[0].empty();
    if (!p.charMode)
      for (const std::string& s : seps) p.separators.push_back(compile(node, s, "separator"));
  } else {
    const std::string exp = ir::attrString(node, "tokenexp");
    p.charMode = exp == ".";
    if (!p.charMode) p.tokenexp = compile(node, exp, "tokenexp");
  }
  if (p.charMode && p.minChars >= 2)
    ir::failNode(node, "mincharnum " + std::to_string(p.minChars) +
                           " is too big for character tokenization");
  return p;
}

struct Match {
  size_t pos, len;
};

// The leftmost-longest match of `e` in text[start, end), or none; text before `start` is context
// (for ^ and \b), as a search from there.
std::optional<Match> findLongest(const Expression& e, std::string_view text, size_t start) {
  const re2::StringPiece whole(text.data(), text.size());
  re2::StringPiece m;
  if (!e->Match(whole, start, whole.size(), re2::RE2::UNANCHORED, &m, 1)) return std::nullopt;
  return Match{static_cast<size_t>(m.data() - text.data()), m.size()};
}

size_t charsOf(std::string_view s) {
  size_t n = 0;
  utf8Length(s, n);
  return n;
}

// The bytes to step over after an empty match at pos (one character; past the end: 1).
size_t stepAt(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 1;
  const size_t len = utf8SequenceAt(s, pos);
  return len ? len : 1;
}

std::vector<std::string_view> splitBySeparators(const TokenizerParams& p, std::string_view s) {
  std::vector<std::string_view> row{s}, pieces;
  for (const auto& sep : p.separators) {
    pieces.clear();
    for (std::string_view text : row) {
      size_t start = 0;
      while (start <= text.size()) {
        const std::optional<Match> m = findLongest(sep, text, start);
        if (!m) {
          const std::string_view tail = text.substr(start);
          if (charsOf(tail) >= p.minChars) pieces.push_back(tail);
          break;
        }
        const std::string_view piece = text.substr(start, m->pos - start);
        if (charsOf(piece) >= p.minChars) pieces.push_back(piece);
        start = m->pos + (m->len > 0 ? m->len : stepAt(text, m->pos));
      }
    }
    if (pieces.empty()) return {};  // nothing left for the remaining separators
    row = pieces;
  }
  return row;
}

std::vector<std::string_view> matchTokens(const TokenizerParams& p, std::string_view s) {
  std::vector<std::string_view> row;
  if (charsOf(s) < p.minChars) return row;
  size_t start = 0;
  while (start <= s.size()) {
    const std::optional<Match> m = findLongest(*p.tokenexp, s, start);
    if (!m) break;
    const std::string_view token = s.substr(m->pos, m->len);
    if (charsOf(token) >= p.minChars) {
      row.push_back(token);
      start = m->pos + m->len;
    } else {
      start = m->pos + stepAt(s, m->pos);
    }
  }
  return row;
}

void tokenizerKernel(KernelContext& ctx, const TokenizerParams& p) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 1 && x.rank() != 2)
    ctx.fail("X must be [C] or [N, C], got " + x.describe(), ErrorCode::kInvalidArgument);
  if (x.numel() == 0) {  // onnxruntime: [N, 0] or [0]
    Shape shape = x.rank() == 2 ? Shape{x.dim(0), 0} : Shape{0};
    ctx.allocateOutput(0, DataType::kString, shape);
    return;
  }
  const std::string* in = x.data<std::string>();
  std::vector<std::vector<std::string_view>> rows(static_cast<size_t>(x.numel()));
  size_t widest = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const std::string_view s = in[i];
    size_t chars = 0;
    if (!utf8Length(s, chars))
      ctx.fail("X[" + std::to_string(i) + "] is not valid UTF-8", ErrorCode::kInvalidArgument);
    std::vector<std::string_view>& row = rows[static_cast<size_t>(i)];
    if (p.charMode) {
      for (size_t k = 0; k < s.size();) {
        const size_t len = utf8SequenceAt(s, k);
        row.push_back(s.substr(k, len));
        k += len;
      }
    } else {
      row = p.tokenexp ? matchTokens(p, s) : splitBySeparators(p, s);
    }
    widest = std::max(widest, row.size());
  }
  Shape shape = x.shape();
  const size_t width = widest == 0 ? 0 : widest + (p.mark ? 2 : 0);
  shape.push_back(static_cast<int64_t>(width));
  std::string* out = ctx.allocateOutput(0, DataType::kString, shape).data<std::string>();
  for (const auto& row : rows) {
    if (width == 0) break;
    std::string* o = out;
    if (p.mark) *o++ = std::string(1, '\x02');
    for (std::string_view t : row) *o++ = std::string(t);
    if (p.mark) *o++ = std::string(1, '\x03');
    while (o < out + width) *o++ = p.pad;
    out += width;
  }
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "Tokenizer",
                                bindKernel(tokenizerParams, tokenizerKernel));

}  // namespace kiln::cpu
