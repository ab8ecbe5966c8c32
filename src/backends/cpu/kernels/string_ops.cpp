// CPU kernels of the string ops: StringNormalizer (stopword removal and case change), StringConcat
// (broadcast concatenation), StringSplit (Python str.split semantics, padded with "") and
// RegexFullMatch (std::regex ECMAScript syntax, compiled once when the engine is built).
#include <locale.h>
#include <cwctype>
#include <regex>
#include <set>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/run_checks.h"
#include "backends/cpu/kernels/utf8.h"

namespace kiln::cpu {
namespace {

/// Decodes UTF-8 into code points; a byte that starts no valid sequence stands for itself.
std::u32string decodeUtf8(const std::string& s) {
  std::u32string out;
  size_t i = 0;
  while (i < s.size()) {
    char32_t c = 0;
    const size_t len = utf8SequenceAt(s, i, &c);
    out.push_back(len ? c : static_cast<unsigned char>(s[i]));
    i += len ? len : 1;
  }
  return out;
}

std::string encodeUtf8(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

enum class CaseChange { kNone, kLower, kUpper };

/// Unicode case mapping through the C.UTF-8 locale (ASCII-only if the system lacks it); kiln
/// does not follow the node's `locale` attribute, whose case rules only differ for a few scripts.
std::string changeCase(const std::string& s, CaseChange change) {
  if (change == CaseChange::kNone) return s;
  static const locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  std::u32string text = decodeUtf8(s);
  for (char32_t& c : text) {
    if (utf8) {
      const auto w = static_cast<wint_t>(c);
      c = static_cast<char32_t>(change == CaseChange::kLower ? towlower_l(w, utf8)
                                                             : towupper_l(w, utf8));
    } else if (c < 0x80) {
      c = static_cast<char32_t>(change == CaseChange::kLower ? std::tolower(static_cast<int>(c))
                                                             : std::toupper(static_cast<int>(c)));
    }
  }
  return encodeUtf8(text);
}

struct StringNormalizerAttrs {
  CaseChange change = CaseChange::kNone;
  bool caseSensitive = false;
  std::set<std::string> stopwords;  // lower-cased unless case-sensitive
};

StringNormalizerAttrs stringNormalizerAttrs(const ir::Node& node) {
  StringNormalizerAttrs a;
  const std::string action = ir::attrString(node, "case_change_action", "NONE");
  a.change = action == "LOWER"   ? CaseChange::kLower
             : action == "UPPER" ? CaseChange::kUpper
                                 : CaseChange::kNone;
  a.caseSensitive = ir::attrInt(node, "is_case_sensitive", 0) != 0;
  // Case-insensitive matching compares lower-cased forms.
  if (ir::hasAttr(node, "stopwords")) {
    for (const std::string& w : ir::attrStrings(node, "stopwords"))
      a.stopwords.insert(a.caseSensitive ? w : changeCase(w, CaseChange::kLower));
  }
  return a;
}

void stringNormalizerKernel(KernelContext& ctx, const StringNormalizerAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  if (!(x.rank() == 1 || (x.rank() == 2 && x.dim(0) == 1)))
    ctx.fail("input must be [C] or [1, C], got " + x.describe(), ErrorCode::kInvalidArgument);
  const CaseChange change = attrs.change;
  const bool caseSensitive = attrs.caseSensitive;
  const std::set<std::string>& stopwords = attrs.stopwords;
  std::vector<std::string> kept;
  const std::string* in = x.data<std::string>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const std::string key = caseSensitive ? in[i] : changeCase(in[i], CaseChange::kLower);
    if (stopwords.count(key)) continue;
    kept.push_back(changeCase(in[i], change));
  }
  // An input whose every string is a stopword gives one empty string.
  if (kept.empty()) kept.emplace_back();
  const auto count = static_cast<int64_t>(kept.size());
  Tensor& y =
      ctx.allocateOutput(0, DataType::kString, x.rank() == 1 ? Shape{count} : Shape{1, count});
  std::copy(kept.begin(), kept.end(), y.data<std::string>());
}

void stringConcatKernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& y = ctx.allocateOutput(0, DataType::kString, broadcastShapes(ctx, a.shape(), b.shape()));
  mapBinary<std::string, std::string>(
      a, b, y, [](const std::string& l, const std::string& r) { return l + r; });
}

bool isPythonSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/// Python's s.split(delimiter, maxsplit); an empty delimiter splits on runs of whitespace.
std::vector<std::string> splitString(const std::string& s, const std::string& delimiter,
                                     int64_t maxsplit) {
  std::vector<std::string> parts;
  if (delimiter.empty()) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && isPythonSpace(s[i])) ++i;
      if (i == s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t end = s.size();
        while (end > i && isPythonSpace(s[end - 1])) --end;
        parts.push_back(s.substr(i, end - i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !isPythonSpace(s[j])) ++j;
      parts.push_back(s.substr(i, j - i));
      i = j;
    }
    return parts;
  }
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    const size_t hit = s.find(delimiter, start);
    if (hit == std::string::npos) break;
    parts.push_back(s.substr(start, hit - start));
    start = hit + delimiter.size();
  }
  parts.push_back(s.substr(start));
  return parts;
}

struct StringSplitAttrs {
  std::string delimiter;
  int64_t maxsplit = -1;
};

StringSplitAttrs stringSplitAttrs(const ir::Node& node) {
  return {ir::attrString(node, "delimiter", ""), ir::attrInt(node, "maxsplit", -1)};
}

void stringSplitKernel(KernelContext& ctx, const StringSplitAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const std::string& delimiter = attrs.delimiter;
  const int64_t maxsplit = attrs.maxsplit;
  std::vector<std::vector<std::string>> parts(static_cast<size_t>(x.numel()));
  size_t widest = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    parts[i] = splitString(x.data<std::string>()[i], delimiter, maxsplit);
    widest = std::max(widest, parts[i].size());
  }
  Shape yShape = x.shape();
  yShape.push_back(static_cast<int64_t>(widest));
  Tensor& y = ctx.allocateOutput(0, DataType::kString, yShape);
  std::string* out = y.data<std::string>();
  for (size_t i = 0; i < parts.size(); ++i) {
    for (size_t k = 0; k < widest; ++k)
      out[i * widest + k] = k < parts[i].size() ? parts[i][k] : std::string();
  }
  if (ctx.wantsOutput(1)) {
    Tensor& z = ctx.allocateOutput(1, DataType::kInt64, x.shape());
    for (size_t i = 0; i < parts.size(); ++i)
      z.data<int64_t>()[i] = static_cast<int64_t>(parts[i].size());
  }
}

KernelFn makeRegexFullMatch(const KernelCreateInfo& info) {
  const std::string pattern = ir::attrString(info.node, "pattern");
  std::shared_ptr<const std::regex> re;
  try {
    re = std::make_shared<const std::regex>(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    ir::failNode(info.node,
                 "pattern '" + pattern + "' is not a valid regular expression: " + e.what());
  }
  return [re](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.allocateOutput(0, DataType::kBool, x.shape());
    for (int64_t i = 0; i < x.numel(); ++i)
      y.data<bool>()[i] = std::regex_match(x.data<std::string>()[i], *re);
  };
}

KILN_REGISTER_CPU_KERNEL("StringNormalizer",
                         bindKernel(stringNormalizerAttrs, stringNormalizerKernel));
KILN_REGISTER_CPU_KERNEL("StringConcat", stringConcatKernel);
KILN_REGISTER_CPU_KERNEL("StringSplit", bindKernel(stringSplitAttrs, stringSplitKernel));
KILN_REGISTER_CPU_KERNEL("RegexFullMatch", KernelFactory(makeRegexFullMatch));

}  // namespace
}  // namespace kiln::cpu
