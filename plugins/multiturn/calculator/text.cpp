#include "text.h"

#include <algorithm>

namespace grpo::calculator {

namespace {

constexpr size_t kExcerptBytes = 120;

bool continuation(unsigned char c, unsigned char lo = 0x80, unsigned char hi = 0xBF) { return c >= lo && c <= hi; }

}  // namespace

size_t utf8_length(std::string_view text, size_t at, char32_t* code_point) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data()) + at;
  const unsigned char b0 = s[0];
  if (b0 < 0x80) {
    if (code_point) *code_point = b0;
    return 1;
  }
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (n > text.size() - at) return 0;
  char32_t cp = b0 & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) {
    if (!(i == 1 ? continuation(s[i], lo, hi) : continuation(s[i]))) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if (code_point) *code_point = cp;
  return n;
}

size_t character_position(std::string_view text, size_t at) {
  size_t characters = 0;
  for (size_t i = 0; i < at && i < text.size(); ++characters) {
    const size_t n = utf8_length(text, i);
    i += n ? n : 1;
  }
  return characters;
}

std::string excerpt(std::string_view text, size_t at) {
  size_t begin = 0, end = text.size();
  if (text.size() > kExcerptBytes) {
    begin = at > kExcerptBytes / 2 ? at - kExcerptBytes / 2 : 0;
    end = std::min(text.size(), begin + kExcerptBytes);
    // Whole characters only (a sequence is at most 4 bytes): a cut one would
    // read as bytes that are not UTF-8.
    for (int k = 0; k < 3 && begin > 0 && continuation(static_cast<unsigned char>(text[begin])); ++k) --begin;
    for (int k = 0; k < 3 && end < text.size() && continuation(static_cast<unsigned char>(text[end])); ++k) ++end;
  }
  static const char* hex = "0123456789ABCDEF";
  std::string out = begin > 0 ? "..." : "";
  for (size_t i = begin; i < end;) {
    const size_t n = utf8_length(text, i);
    if (n) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      const auto c = static_cast<unsigned char>(text[i++]);
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (end < text.size()) out += "...";
  return out;
}

}  // namespace grpo::calculator
