// Small byte-level scanning helpers shared by the extraction and
// normalisation code (hand-written instead of std::regex for speed).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace grpo::math::scan {

// Python's \s on ASCII.
inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
// Python's \w: non-ASCII bytes count as word characters (letters in UTF-8 text).
inline bool is_word(char c) {
  return is_alpha(c) || is_digit(c) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}
inline char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

inline bool starts_with(std::string_view s, size_t i, std::string_view p) {
  return i <= s.size() && s.size() - i >= p.size() && s.compare(i, p.size(), p) == 0;
}

// Case-insensitive (ASCII) prefix test; p must be lower case.
inline bool starts_with_ci(std::string_view s, size_t i, std::string_view p) {
  if (i > s.size() || s.size() - i < p.size()) return false;
  for (size_t k = 0; k < p.size(); ++k) {
    if (lower(s[i + k]) != p[k]) return false;
  }
  return true;
}

// Next case-insensitive occurrence of p (lower case) at or after `from`.
inline size_t find_ci(std::string_view s, std::string_view p, size_t from) {
  if (p.empty()) return from;
  const char a = p[0];
  const char b = (a >= 'a' && a <= 'z') ? static_cast<char>(a - 'a' + 'A') : a;
  for (size_t i = from; i + p.size() <= s.size(); ++i) {
    if ((s[i] == a || s[i] == b) && starts_with_ci(s, i, p)) return i;
  }
  return std::string_view::npos;
}

inline size_t skip_spaces(std::string_view s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

inline std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// Replace every occurrence of `from` with `to`.
inline std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (true) {
    size_t k = s.find(from, i);
    if (k == std::string_view::npos) break;
    out.append(s.substr(i, k - i));
    out.append(to);
    i = k + from.size();
  }
  out.append(s.substr(i));
  return out;
}

}  // namespace grpo::math::scan
