// Python's repr() of strings and floats, and int() / float() parsing of text
// (the declarations are in pystr.h).
#include "tokenizer/jinja/pystr.h"

#include <utf8proc.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace grpo::tok::jinja::py {

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

std::optional<PyInt> parse_int(std::string_view text, int base) {
  std::string s = trimmed_ascii(text);
  if (s.empty() || !drop_underscores(s)) return std::nullopt;
  size_t i = (s[0] == '+' || s[0] == '-') ? 1 : 0;
  if (i == s.size()) return std::nullopt;
  PyInt v = 0;
  for (size_t j = i; j < s.size(); ++j) {
    char c = static_cast<char>(std::tolower(static_cast<unsigned char>(s[j])));
    int digit = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c >= 'a' && c <= 'z') ? c - 'a' + 10 : 99;
    if (digit >= base) return std::nullopt;
    // Accumulated negatively so that the most negative value fits too.
    if (__builtin_mul_overflow(v, base, &v) || __builtin_sub_overflow(v, digit, &v)) return std::nullopt;
  }
  if (s[0] == '-') return v;
  if (v == kPyIntMin) return std::nullopt;
  return -v;
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
