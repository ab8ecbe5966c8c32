// CPU kernel of com.microsoft Tokenizer (ir/ops/contrib_tokenizer.cpp), as onnxruntime's kernel
// tokenizes:
// - character mode (separators [""] or tokenexp "."): every UTF-8 character is a token;
// - separators: each separator in turn splits every token so far at its matches, keeping the
//   pieces of at least mincharnum characters (no piece left ends the splitting: no tokens);
// - tokenexp: the successive matches of at least mincharnum characters are the tokens.
// A row is [start mark 0x02] tokens [end mark 0x03] then pad_value up to the longest row.
// onnxruntime's expressions are RE2's with longest match; kiln runs them with std::regex
// (ECMAScript syntax, as RegexFullMatch) and takes at the leftmost match position the longest
// match (RE2's leftmost-longest rule): the longest of the top-level alternatives' matches there,
// or for alternatives inside a group and lazy repetitions a scan of every longer end (slow on
// long strings). A greedy pattern's match is taken as its longest, which holds for all but
// contrived patterns ("(a*)(ab)?").
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/utf8.h"

namespace kiln::cpu {
namespace {

// A compiled expression, with what finding its longest match at a position takes: its top-level
// alternatives compiled apart (the longest of their matches there), or a scan of every longer
// end (alternatives inside a group, lazy repetitions), or nothing (ECMAScript's greedy match).
struct Expression {
  std::shared_ptr<const std::regex> re;
  std::vector<std::regex> alternatives;
  bool scan = false;
};

struct TokenizerParams {
  bool mark = false;
  std::string pad;
  size_t minChars = 1;
  bool charMode = false;
  std::vector<Expression> separators;  // or else one tokenexp
  std::optional<Expression> tokenexp;
};

// The pattern's top-level alternatives ("a|b(c|d)" -> "a", "b(c|d)"), and whether one holds an
// alternative of its own.
std::vector<std::string> topLevelAlternatives(const std::string& pattern, bool& nested) {
  std::vector<std::string> parts(1);
  int depth = 0;
  bool inClass = false;
  nested = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      parts.back() += pattern.substr(i++, 2);
      continue;
    }
    if (inClass) {
      inClass = c != ']';
    } else if (c == '[') {
      inClass = true;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (c == '|') {
      if (depth == 0) {
        parts.emplace_back();
        continue;
      }
      nested = true;
    }
    parts.back() += c;
  }
  return parts;
}

Expression compile(const ir::Node& node, const std::string& pattern, const char* what) {
  Expression e;
  try {
    e.re = std::make_shared<const std::regex>(pattern, std::regex::ECMAScript);
    bool nested = false;
    const std::vector<std::string> parts = topLevelAlternatives(pattern, nested);
    const bool lazy =
        pattern.find("*?") != std::string::npos || pattern.find("+?") != std::string::npos ||
        pattern.find("??") != std::string::npos || pattern.find("}?") != std::string::npos;
    e.scan = nested || lazy;
    if (!e.scan && parts.size() > 1)
      for (const std::string& part : parts)
        e.alternatives.emplace_back(part, std::regex::ECMAScript);
  } catch (const std::regex_error& error) {
    ir::failNode(node, std::string(what) + " '" + pattern +
                           "' is not a valid regular expression: " + error.what());
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

// The leftmost-longest match of `e` in text[start, end), or none.
std::optional<Match> findLongest(const Expression& e, std::string_view text, size_t start) {
  namespace rc = std::regex_constants;
  const char* base = text.data();
  const char* end = base + text.size();
  std::cmatch m;
  if (!std::regex_search(base + start, end, m, *e.re,
                         start > 0 ? rc::match_prev_avail : rc::match_default))
    return std::nullopt;
  const char* at = m[0].first;
  const auto from = at > base ? rc::match_prev_avail : rc::match_default;
  const char* last = m[0].second;
  for (const std::regex& alternative : e.alternatives) {
    std::cmatch a;
    if (std::regex_search(at, end, a, alternative, from | rc::match_continuous))
      last = std::max(last, a[0].second);
  }
  for (const char* longer = end; e.scan && longer > last; --longer) {
    if (std::regex_match(at, longer, *e.re, longer < end ? from | rc::match_not_eol : from)) {
      last = longer;
      break;
    }
  }
  return Match{static_cast<size_t>(at - base), static_cast<size_t>(last - at)};
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
