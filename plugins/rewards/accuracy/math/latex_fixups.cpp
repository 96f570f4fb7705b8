// Unit stripping and malformed-operator repair steps of the normaliser.
#include <string>
#include <string_view>

#include "latex_normalize.h"
#include "text_scan.h"

namespace grpo::math::detail {
namespace {

using scan::is_digit;
using scan::is_space;
using scan::starts_with;

// Unit words dropped after a number (latex2sympy2_extended's list; '.' matches any character).
const std::string_view kUnits[] = {
    "integerpoint", "feet", "sue", "digit", "pound", "meal", "edge", "student", "children ticket",
    "multiple", "east", "degree", "mph", "kmph", "ft", "m square", " m east", "sq m", "deg", "mile",
    "q .", "monkey", "prime", "ratio", "profit of rs", "rd", "o", "gm", "p . m", "lb", "tile", "per",
    "dm", "lt", "gain", "ab", "way", "west", "a .", "b .", "c .", "d .", "e .", "f .", "g .", "h .",
    "t", "h", "no change", "men", "soldier", "pie", "bc", "excess", "st", "inches", "noon", "cent",
    "by", "gal", "kmh", "c", "acre", "rise", "a . m", "th", "\xcf\x80 r 2", "sq", "mark", "l", "toy",
    "coin", "sq . m", "gallon", "\xc2\xb0 f", "profit", "minw", "yr", "women", "am", "pm", "hr",
    "cu cm", "square", "v \xc3\xa2 \xe2\x82\xac \xe2\x84\xa2", "are", "rupee", "rounds", "cubic",
    "cc", "mtr", "s", "ohm", "number", "day", "hour", "minute", "min", "second", "man", "woman",
    "sec", "cube", "mt", "sq inch", "mp", "\xe2\x88\x8f cm \xc2\xb3", "hectare", "more", "unit",
    "cu . m", "cm 2", "rs .", "rs", "kg", "g", "month", "km", "m", "cm", "mm", "apple", "liter",
    "loss", "yard", "pure", "year", "increase", "decrease", "d", "less", "Surface", "litre",
    "pi sq m", "s .", "metre", "meter", "inch"};

// Does tail[a..] read UNIT, an optional "s"/"es", then only spaces?
bool unit_at(std::string_view tail, size_t a, std::string_view unit) {
  if (tail.size() - a < unit.size()) return false;
  for (size_t k = 0; k < unit.size(); ++k) {
    const char c = tail[a + k];
    if (unit[k] == '.' ? c == '\n' : c != unit[k]) return false;
  }
  std::string_view rest = scan::trim(tail.substr(a + unit.size()));
  return rest.empty() || rest == "s" || rest == "es";
}

// (\d|\}|\s)\s*(?:UNITS)(?:s|es)?\s*$  ->  \1   (leftmost match)
bool strip_unit_word(std::string& text) {
  size_t core_end = text.size();
  while (core_end > 0 && is_space(text[core_end - 1])) --core_end;
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    const char c = text[i];
    if (!(is_digit(c) || c == '}' || is_space(c))) continue;
    const size_t first = scan::skip_spaces(text, i + 1);
    if (first >= core_end || core_end - first > 24) continue;
    std::string_view tail = std::string_view(text).substr(i + 1);
    const size_t spaces = first - (i + 1);
    for (std::string_view unit : kUnits) {
      bool hit = false;
      for (size_t a = 0; a <= spaces && !hit; ++a) hit = unit_at(tail, a, unit);
      if (hit) {
        std::string cut = text.substr(0, i + 1);
        if (cut.empty() || cut == text) return false;
        text.swap(cut);
        return true;
      }
    }
  }
  return false;
}

// (\\(?:text|mbox){.*?})(\^\d|\{\^\d\})?$  ->  ""
std::string strip_trailing_text(const std::string& text) {
  const size_t n = text.size();
  size_t close = std::string::npos;
  if (n >= 1 && text[n - 1] == '}') close = n - 1;
  else if (n >= 3 && text[n - 3] == '}' && text[n - 2] == '^' && is_digit(text[n - 1])) close = n - 3;
  if (close == std::string::npos) return text;
  for (size_t k = 0; k + 6 <= close; ++k) {
    if (text[k] == '\\' && (starts_with(text, k, "\\text{") || starts_with(text, k, "\\mbox{"))) {
      return std::string(scan::trim(std::string_view(text).substr(0, k)));
    }
  }
  return text;
}

// Length of a UTF-8 sequence from its lead byte.
size_t utf8_len(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u < 0x80) return 1;
  if ((u >> 5) == 6) return 2;
  if ((u >> 4) == 14) return 3;
  if ((u >> 3) == 30) return 4;
  return 1;
}

template <class F>
std::string sub_all(const std::string& s, F try_at) {
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  std::string rep;
  while (i < s.size()) {
    rep.clear();
    const size_t len = try_at(s, i, rep);
    if (len) {
      out += rep;
      i += len;
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

size_t opt_space(const std::string& s, size_t j) { return (j < s.size() && is_space(s[j])) ? j + 1 : j; }

size_t find_on_line(const std::string& s, char c, size_t from) {
  for (size_t k = from; k < s.size(); ++k) {
    if (s[k] == c) return k;
    if (s[k] == '\n') break;
  }
  return std::string::npos;
}

// "PREFIX\s?(BODY)" with BODY lazily up to the first ')' -> OPEN BODY "}"
std::string paren_to_brace(const std::string& s, std::string_view prefix, std::string_view open) {
  return sub_all(s, [&](const std::string& t, size_t i, std::string& rep) -> size_t {
    if (!starts_with(t, i, prefix)) return 0;
    const size_t j = opt_space(t, i + prefix.size());
    if (j >= t.size() || t[j] != '(') return 0;
    const size_t k = find_on_line(t, ')', j + 1);
    if (k == std::string::npos) return 0;
    rep.append(open).append(t, j + 1, k - j - 1).append("}");
    return k + 1 - i;
  });
}

// "\cmd\s?(\d)\s?(\d+)" -> "\cmd{d}{ddd}"
std::string digits_to_args(const std::string& s, std::string_view cmd) {
  return sub_all(s, [&](const std::string& t, size_t i, std::string& rep) -> size_t {
    if (!starts_with(t, i, cmd)) return 0;
    size_t j = opt_space(t, i + cmd.size());
    if (j >= t.size() || !is_digit(t[j])) return 0;
    const char a = t[j];
    size_t k = opt_space(t, j + 1);
    if (k >= t.size() || !is_digit(t[k])) return 0;
    size_t e = k;
    while (e < t.size() && is_digit(t[e])) ++e;
    rep.append(cmd).append("{").push_back(a);
    rep.append("}{").append(t, k, e - k).append("}");
    return e - i;
  });
}

std::string fix_sqrt(const std::string& text) {
  if (text.find("\\sqrt") == std::string::npos) return text;
  std::string out;
  size_t pos = text.find("\\sqrt");
  out.append(text, 0, pos);
  while (pos != std::string::npos) {
    const size_t next = text.find("\\sqrt", pos + 5);
    std::string_view part = std::string_view(text).substr(pos + 5, (next == std::string::npos ? text.size() : next) - pos - 5);
    part.remove_prefix(scan::skip_spaces(part, 0));
    if (!part.empty() && part[0] != '{' && part[0] != '[') {
      const size_t l = std::min(utf8_len(part[0]), part.size());
      out.append("\\sqrt{").append(part.substr(0, l)).append("}").append(part.substr(l));
    } else {
      out.append("\\sqrt").append(part);
    }
    pos = next;
  }
  return out;
}

std::string fix_fracs(const std::string& text) {
  size_t pos = text.find("\\frac");
  if (pos == std::string::npos) return text;
  std::string out(text, 0, pos);
  while (pos != std::string::npos) {
    const size_t next = text.find("\\frac", pos + 5);
    std::string_view part = std::string_view(text).substr(pos + 5, (next == std::string::npos ? text.size() : next) - pos - 5);
    part.remove_prefix(scan::skip_spaces(part, 0));
    out.append("\\frac");
    if (!part.empty() && part[0] == '{') {
      out.append(part);
    } else if (part.size() < 2) {
      return text;
    } else {
      const size_t la = std::min(utf8_len(part[0]), part.size());
      std::string_view a = part.substr(0, la);
      std::string_view rest = part.substr(la);
      if (rest.empty()) return text;
      const size_t lb = std::min(utf8_len(rest[0]), rest.size());
      std::string_view b = rest.substr(0, lb);
      if (b != "{") {
        out.append("{").append(a).append("}{").append(b).append("}").append(rest.substr(lb));
      } else {
        out.append("{").append(a).append("}").append(rest);
      }
    }
    pos = next;
  }
  return out;
}

bool canonical_int(std::string_view s) {
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  if (s.empty()) return false;
  for (char c : s) {
    if (!is_digit(c)) return false;
  }
  return s.size() == 1 || s[0] != '0';
}

std::string fix_a_slash_b(const std::string& text) {
  const size_t k = text.find('/');
  if (k == std::string::npos || text.find('/', k + 1) != std::string::npos) return text;
  std::string_view a = std::string_view(text).substr(0, k);
  std::string_view b = std::string_view(text).substr(k + 1);
  if (!canonical_int(a) || !canonical_int(b) || a == "-0" || b == "-0") return text;
  return "\\frac{" + std::string(a) + "}{" + std::string(b) + "}";
}

}  // namespace

std::string strip_units(std::string text) {
  std::string cut = strip_trailing_text(text);
  if (!cut.empty() && cut != text) text = std::move(cut);
  for (int round = 0; round < 2; ++round) strip_unit_word(text);
  return text;
}

std::string fix_malformed_operators(std::string text) {
  text = paren_to_brace(text, "^", "^{");
  text = paren_to_brace(text, "sqrt", "\\sqrt{");
  text = digits_to_args(text, "\\frac");
  text = digits_to_args(text, "\\log_");
  // \frac{..}\s?(\d) -> \frac{..}{d}
  text = sub_all(text, [](const std::string& t, size_t i, std::string& rep) -> size_t {
    if (!starts_with(t, i, "\\frac")) return 0;
    const size_t j = opt_space(t, i + 5);
    if (j >= t.size() || t[j] != '{') return 0;
    for (size_t c = j + 1; c < t.size() && t[c] != '\n'; ++c) {
      if (t[c] != '}') continue;
      const size_t d = opt_space(t, c + 1);
      size_t digit = std::string::npos;
      if (c + 1 < t.size() && is_digit(t[c + 1])) digit = c + 1;
      else if (d < t.size() && d != c + 1 && is_digit(t[d])) digit = d;
      if (digit == std::string::npos) continue;
      rep.append("\\frac{").append(t, j + 1, c - j - 1).append("}{").push_back(t[digit]);
      rep.push_back('}');
      return digit + 1 - i;
    }
    return 0;
  });
  // \frac\s?(\d)\s?{..} -> \frac{d}{..}
  text = sub_all(text, [](const std::string& t, size_t i, std::string& rep) -> size_t {
    if (!starts_with(t, i, "\\frac")) return 0;
    const size_t j = opt_space(t, i + 5);
    if (j >= t.size() || !is_digit(t[j])) return 0;
    const size_t k = opt_space(t, j + 1);
    if (k >= t.size() || t[k] != '{') return 0;
    const size_t c = find_on_line(t, '}', k + 1);
    if (c == std::string::npos) return 0;
    rep.append("\\frac{").push_back(t[j]);
    rep.append("}{").append(t, k + 1, c - k - 1).append("}");
    return c + 1 - i;
  });
  // \sqrt\s?(\d) -> \sqrt{d}
  text = sub_all(text, [](const std::string& t, size_t i, std::string& rep) -> size_t {
    if (!starts_with(t, i, "\\sqrt")) return 0;
    const size_t j = opt_space(t, i + 5);
    if (j >= t.size() || !is_digit(t[j])) return 0;
    rep.append("\\sqrt{").push_back(t[j]);
    rep.push_back('}');
    return j + 1 - i;
  });
  text = scan::replace_all(text, " sqrt", "\\sqrt");
  text = fix_sqrt(text);
  text = fix_fracs(text);
  return fix_a_slash_b(text);
}

}  // namespace grpo::math::detail
