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

namespace {

// str.isprintable() for one code point, the test repr() applies.
bool printable(char32_t cp) {
  if (cp < 0x80) return cp >= 0x20 && cp < 0x7F;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS: case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

}  // namespace

std::string repr(std::string_view text) {
  bool has_single = text.find('\'') != std::string_view::npos;
  bool has_double = text.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t cp : decode(text)) {
    char buf[16];
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (printable(cp)) {
      append_utf8(out, cp);
    } else {
      if (cp < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
      else if (cp < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      else std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(cp));
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

std::string float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  // The fewest significant digits that read back as the same double.
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*e", precision - 1, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  std::string s(buf);
  bool negative = s[0] == '-';
  if (negative) s.erase(0, 1);
  size_t e = s.find('e');
  int exponent = std::atoi(s.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (s[i] != '.') digits.push_back(s[i]);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  int point = exponent + 1;  // value = 0.DIGITS * 10^point
  std::string out = negative ? "-" : "";
  if (point > -4 && point <= 16) {
    // Python prints fixed notation for exponents in [-4, 16).
    if (point <= 0) {
      out += "0." + std::string(static_cast<size_t>(-point), '0') + digits;
    } else if (static_cast<size_t>(point) < digits.size()) {
      out += digits.substr(0, point) + "." + digits.substr(point);
    } else {
      out += digits + std::string(point - digits.size(), '0') + ".0";
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  std::snprintf(buf, sizeof buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + buf;
}

namespace {

std::string trimmed_ascii(std::string_view text) {
  std::string s = strip(text, std::nullopt, true, true);
  return s;
}

// Underscores are allowed only between digits, as in Python literals.
bool drop_underscores(std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '_') {
      out.push_back(s[i]);
      continue;
    }
    if (i == 0 || i + 1 == s.size() || !std::isxdigit(static_cast<unsigned char>(s[i - 1])) ||
        !std::isxdigit(static_cast<unsigned char>(s[i + 1])))
      return false;
  }
  s = out;
  return true;
}

}  // namespace

std::optional<int64_t> parse_int(std::string_view text, int base) {
  std::string s = trimmed_ascii(text);
  if (s.empty() || !drop_underscores(s)) return std::nullopt;
  size_t i = (s[0] == '+' || s[0] == '-') ? 1 : 0;
  if (i == s.size()) return std::nullopt;
  for (size_t j = i; j < s.size(); ++j) {
    char c = static_cast<char>(std::tolower(static_cast<unsigned char>(s[j])));
    int digit = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c >= 'a' && c <= 'z') ? c - 'a' + 10 : 99;
    if (digit >= base) return std::nullopt;
  }
  errno = 0;
  long long v = std::strtoll(s.c_str(), nullptr, base);
  if (errno == ERANGE) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<double> parse_float(std::string_view text) {
  std::string s = trimmed_ascii(text);
  if (s.empty() || !drop_underscores(s)) return std::nullopt;
  std::string body = s.substr((s[0] == '+' || s[0] == '-') ? 1 : 0);
  std::string low;
  for (char c : body) low.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (low == "inf" || low == "infinity" || low == "nan") return std::strtod(s.c_str(), nullptr);
  bool digits = false;
  for (char c : low) {
    if (std::isdigit(static_cast<unsigned char>(c))) digits = true;
    else if (c != '.' && c != 'e' && c != '+' && c != '-') return std::nullopt;
  }
  if (!digits) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

}  // namespace grpo::tok::jinja::py
