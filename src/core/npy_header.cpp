#include "core/npy_header.h"

#include <cctype>
#include <limits>

#include "kiln/error.h"

namespace kiln {

namespace {

// A recursive-descent reader over the dict literal; every error names the file and the position.
class HeaderReader {
 public:
  HeaderReader(const std::string& text, const std::string& path) : text_(text), path_(path) {}

  NpyHeader read() {
    NpyHeader header;
    bool haveDescr = false, haveOrder = false, haveShape = false;
    expect('{');
    while (!consume('}')) {
      const std::string key = quoted();
      expect(':');
      if (key == "descr" && !haveDescr) {
        header.descr = quoted();
        haveDescr = true;
      } else if (key == "fortran_order" && !haveOrder) {
        header.fortranOrder = boolean();
        haveOrder = true;
      } else if (key == "shape" && !haveShape) {
        header.shape = tuple();
        haveShape = true;
      } else {
        fail((haveDescr && key == "descr") || (haveOrder && key == "fortran_order") ||
                     (haveShape && key == "shape")
                 ? "the key '" + key + "' appears twice"
                 : "unexpected key '" + key +
                       "' (a .npy header has only 'descr', 'fortran_order' and 'shape')");
      }
      if (!consume(',')) {
        expect('}');
        break;
      }
    }
    skipSpace();
    if (pos_ != text_.size()) fail("unexpected text after the closing '}'");
    if (!haveDescr) fail("the key 'descr' is missing");
    if (!haveOrder) fail("the key 'fortran_order' is missing");
    if (!haveShape) fail("the key 'shape' is missing");
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorCode::kInvalidArgument, path_ + ": malformed .npy header at character " +
                                                 std::to_string(pos_) + ": " + what);
  }
  void skipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool consume(char c) {
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }
  std::string quoted() {
    skipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      fail("expected a quoted string");
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string::npos) fail("unterminated string");
    std::string s = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }
  bool boolean() {
    skipSpace();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const std::string w = word;
      if (text_.compare(pos_, w.size(), w) == 0) {
        pos_ += w.size();
        return value;
      }
    }
    fail("expected True or False");
  }
  int64_t dim() {
    skipSpace();
    if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      fail("a dimension must be a non-negative integer");
    }
    int64_t value = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      const int digit = text_[pos_++] - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10)
        fail("a dimension does not fit in int64");
      value = value * 10 + digit;
    }
    return value;
  }
  Shape tuple() {
    expect('(');
    Shape shape;
    if (consume(')')) return shape;
    while (true) {
      shape.push_back(dim());
      if (consume(')')) break;
      expect(',');
      if (consume(')')) break;  // (3,) and (2, 3,)
    }
    return shape;
  }

  const std::string& text_;
  const std::string& path_;
  size_t pos_ = 0;
};

}  // namespace

NpyHeader parseNpyHeader(const std::string& text, const std::string& path) {
  return HeaderReader(text, path).read();
}

}  // namespace kiln
