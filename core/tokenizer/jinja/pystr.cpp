#include "tokenizer/jinja/pystr.h"

#include <utf8proc.h>

#include "tokenizer/utf8.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace grpo::tok::jinja::py {

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0, n = 0; i < s.size(); i += n) {
    const char32_t cp = utf8::decode(s, i, &n);
    out.push_back(cp == utf8::kInvalid ? 0xFFFD : cp);
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) { utf8::append(out, cp); }

std::string encode(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : text) append_utf8(out, cp);
  return out;
}

bool is_ascii(std::string_view text) { return utf8::is_ascii(text); }

int64_t length(std::string_view text) {
  int64_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_space(char32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x1C: case 0x1D: case 0x1E: case 0x1F:
    case 0x20: case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool is_line_break(char32_t cp) {
  switch (cp) {
    case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x1C: case 0x1D: case 0x1E: case 0x85: case 0x2028:
    case 0x2029:
      return true;
    default:
      return false;
  }
}

std::string strip(std::string_view text, const std::optional<std::string>& chars, bool left, bool right) {
  std::u32string s = decode(text);
  std::u32string set = chars ? decode(*chars) : std::u32string();
  auto strippable = [&](char32_t cp) { return chars ? set.find(cp) != std::u32string::npos : is_space(cp); };
  size_t lo = 0, hi = s.size();
  if (left) while (lo < hi && strippable(s[lo])) ++lo;
  if (right) while (hi > lo && strippable(s[hi - 1])) --hi;
  return encode(std::u32string_view(s).substr(lo, hi - lo));
}

std::vector<std::string> split(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t at = text.find(*sep, pos);
      if (at == std::string_view::npos) break;
      out.emplace_back(text.substr(pos, at - pos));
      pos = at + sep->size();
    }
    out.emplace_back(text.substr(pos));
    return out;
  }
  std::u32string s = decode(text);
  size_t i = 0;
  while (true) {
    while (i < s.size() && is_space(s[i])) ++i;
    if (i == s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(encode(std::u32string_view(s).substr(i)));
      break;
    }
    size_t j = i;
    while (j < s.size() && !is_space(s[j])) ++j;
    out.push_back(encode(std::u32string_view(s).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t end = text.size();
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      size_t at = text.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      out.emplace_back(text.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    out.emplace_back(text.substr(0, end));
  } else {
    std::u32string s = decode(text);
    size_t i = s.size();
    while (true) {
      while (i > 0 && is_space(s[i - 1])) --i;
      if (i == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        out.push_back(encode(std::u32string_view(s).substr(0, i)));
        break;
      }
      size_t j = i;
      while (j > 0 && !is_space(s[j - 1])) --j;
      out.push_back(encode(std::u32string_view(s).substr(j, i - j)));
      i = j;
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view text, bool keepends) {
  std::u32string s = decode(text);
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  while (i < s.size()) {
    if (!is_line_break(s[i])) {
      ++i;
      continue;
    }
    size_t eol = i + ((s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ? 2 : 1);
    out.push_back(encode(std::u32string_view(s).substr(start, (keepends ? eol : i) - start)));
    start = i = eol;
  }
  if (start < s.size()) out.push_back(encode(std::u32string_view(s).substr(start)));
  return out;
}

std::string replace(std::string_view text, std::string_view old, std::string_view with, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `with` before every code point and at the end.
    std::u32string s = decode(text);
    int64_t done = 0;
    for (char32_t cp : s) {
      if (count < 0 || done < count) {
        out.append(with);
        ++done;
      }
      append_utf8(out, cp);
    }
    if (count < 0 || done < count) out.append(with);
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t at = text.find(old, pos);
    if (at == std::string_view::npos) break;
    out.append(text.substr(pos, at - pos));
    out.append(with);
    pos = at + old.size();
    ++done;
  }
  out.append(text.substr(pos));
  return out;
}

void normalize_range(int64_t len, std::optional<int64_t> start, std::optional<int64_t> end, int64_t& lo, int64_t& hi) {
  lo = start.value_or(0);
  hi = end.value_or(len);
  if (hi > len) hi = len;
  else if (hi < 0) hi = std::max<int64_t>(hi + len, 0);
  if (lo < 0) lo = std::max<int64_t>(lo + len, 0);
}

int64_t find(std::string_view text, std::string_view sub, int64_t start, int64_t end, bool reverse) {
  std::u32string s = decode(text), t = decode(sub);
  if (start > end || end - start < static_cast<int64_t>(t.size())) return -1;
  std::u32string_view window = std::u32string_view(s).substr(start, end - start);
  size_t at = reverse ? window.rfind(t) : window.find(t);
  return at == std::u32string_view::npos ? -1 : start + static_cast<int64_t>(at);
}

int64_t count(std::string_view text, std::string_view sub, int64_t start, int64_t end) {
  std::u32string s = decode(text), t = decode(sub);
  if (start > end) return 0;
  if (t.empty()) return end - start + 1;
  std::u32string_view window = std::u32string_view(s).substr(start, end - start);
  int64_t n = 0;
  for (size_t at = window.find(t); at != std::u32string_view::npos; at = window.find(t, at + t.size())) ++n;
  return n;
}

namespace {

bool is_cased(char32_t cp) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}
char32_t to_upper(char32_t cp) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp))); }
char32_t to_lower(char32_t cp) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))); }
char32_t to_title(char32_t cp) { return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(cp))); }

template <typename F>
std::string map_code_points(std::string_view text, F f) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : decode(text)) append_utf8(out, f(cp));
  return out;
}

}  // namespace

// Python applies Unicode's full case mappings; the ones that change length
// and occur in ordinary text are special-cased over utf8proc's simple mapping.
std::string upper(std::string_view text) {
  std::string out;
  for (char32_t cp : decode(text)) {
    if (cp == 0xDF) out += "SS";  // ß
    else append_utf8(out, to_upper(cp));
  }
  return out;
}

std::string lower(std::string_view text) {
  std::string out;
  for (char32_t cp : decode(text)) {
    if (cp == 0x130) out += "i\u0307";  // İ
    else append_utf8(out, to_lower(cp));
  }
  return out;
}
std::string swapcase(std::string_view text) {
  return map_code_points(text, [](char32_t cp) {
    char32_t u = to_upper(cp);
    return u != cp ? u : to_lower(cp);
  });
}

std::string title(std::string_view text) {
  std::string out;
  bool previous_cased = false;
  for (char32_t cp : decode(text)) {
    append_utf8(out, previous_cased ? to_lower(cp) : to_title(cp));
    previous_cased = is_cased(cp);
  }
  return out;
}

std::string capitalize(std::string_view text) {
  std::string out;
  bool first = true;
  for (char32_t cp : decode(text)) {
    append_utf8(out, first ? to_title(cp) : to_lower(cp));
    first = false;
  }
  return out;
}

bool is_lower(std::string_view text) {
  bool cased = false;
  for (char32_t cp : decode(text)) {
    if (!is_cased(cp)) continue;
    if (to_lower(cp) != cp || utf8proc_category(static_cast<utf8proc_int32_t>(cp)) != UTF8PROC_CATEGORY_LL) return false;
    cased = true;
  }
  return cased;
}

bool is_upper(std::string_view text) {
  bool cased = false;
  for (char32_t cp : decode(text)) {
    if (!is_cased(cp)) continue;
    auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
    if (cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT) return false;
    cased = true;
  }
  return cased;
}

std::string pad(std::string_view text, int64_t width, char32_t fill, int where) {
  int64_t len = length(text);
  if (width <= len) return std::string(text);
  int64_t margin = width - len, left = 0;
  if (where > 0) left = margin;
  else if (where == 0) left = margin / 2 + (margin & width & 1);  // CPython's rounding of center()
  std::string out;
  for (int64_t i = 0; i < left; ++i) append_utf8(out, fill);
  out.append(text);
  for (int64_t i = left; i < margin; ++i) append_utf8(out, fill);
  return out;
}

}  // namespace grpo::tok::jinja::py
