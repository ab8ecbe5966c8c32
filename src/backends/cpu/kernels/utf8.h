// UTF-8 sequences in the string kernels (StringNormalizer, Tokenizer).
#pragma once
#include <cstddef>
#include <string_view>

namespace kiln::cpu {

/// The byte length of the valid UTF-8 sequence that starts at s[i], its code point in *code;
/// 0 when the bytes there start none (a stray continuation byte, a truncated sequence).
inline size_t utf8SequenceAt(std::string_view s, size_t i, char32_t* code = nullptr) {
  const auto b = static_cast<unsigned char>(s[i]);
  const size_t len = b < 0x80             ? 1
                     : (b & 0xE0) == 0xC0 ? 2
                     : (b & 0xF0) == 0xE0 ? 3
                     : (b & 0xF8) == 0xF0 ? 4
                                          : 0;
  if (len == 0 || i + len > s.size()) return 0;
  char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < len; ++k) {
    const auto cont = static_cast<unsigned char>(s[i + k]);
    if ((cont & 0xC0) != 0x80) return 0;
    c = (c << 6) | (cont & 0x3F);
  }
  if (code) *code = c;
  return len;
}

/// The number of UTF-8 characters of s, or false when s is not valid UTF-8.
inline bool utf8Length(std::string_view s, size_t& chars) {
  chars = 0;
  for (size_t i = 0; i < s.size(); ++chars) {
    const size_t len = utf8SequenceAt(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

}  // namespace kiln::cpu
