#include "latex_normalize.h"

#include <vector>

#include "text_scan.h"

namespace grpo::math {
namespace {

using scan::is_alpha;
using scan::is_space;
using scan::starts_with;

// Returns the index of the brace closing the one at `open`, searching below max_pos.
size_t closing_brace(std::string_view t, size_t open, size_t max_pos) {
  int depth = 1;
  for (size_t i = open + 1; i < max_pos; ++i) {
    if (t[i] == '{') {
      ++depth;
    } else if (t[i] == '}') {
      if (--depth == 0) return i;
    }
  }
  return std::string_view::npos;
}

bool has_list_separator(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == ',' || s[i] == ';') return true;
    for (std::string_view w : {std::string_view("and"), std::string_view("or")}) {
      if (starts_with(s, i, w) && (i == 0 || !scan::is_word(s[i - 1])) &&
          (i + w.size() == s.size() || !scan::is_word(s[i + w.size()]))) {
        return true;
      }
    }
  }
  return false;
}

size_t rfind_before(std::string_view t, std::string_view p, size_t end) {
  if (end < p.size()) return std::string_view::npos;
  return t.substr(0, end).rfind(p);
}

const std::string_view kLeftDelims[] = {
    "\\{",      "{",        "\\|",     "|",       "[",      "(",      "\\rbracl",   "\\lgroup",
    "\\lbrace", "\\lbrack", "\\vert",  "\\lvert", "\\lceil", "\\lfloor", "\\langle", "\\llcorner",
    "\\ulcorner"};
const std::string_view kRightDelims[] = {
    "\\}",      "}",      "\\|",     "|",       "]",        "\\rbrack", "\\rgroup", "\\rbrace",
    "\\vert",   "\\rvert", "\\rceil", "\\rfloor", "\\rangle", "\\lrcorner", "\\urcorner", ")"};

// Drops "\left" / "\mleft" (resp. right) when a delimiter follows.
std::string strip_left_right(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '\\') {
      size_t cmd = 0;
      bool left = false;
      if (starts_with(s, i, "\\left")) cmd = 5, left = true;
      else if (starts_with(s, i, "\\mleft")) cmd = 6, left = true;
      else if (starts_with(s, i, "\\right")) cmd = 6;
      else if (starts_with(s, i, "\\mright")) cmd = 7;
      if (cmd) {
        bool delim = false;
        if (left) {
          for (auto d : kLeftDelims) delim = delim || starts_with(s, i + cmd, d);
        } else {
          for (auto d : kRightDelims) delim = delim || starts_with(s, i + cmd, d);
        }
        if (delim) {
          i += cmd;
          continue;
        }
      }
    }
    out.push_back(s[i++]);
  }
  return out;
}

// \mathrm{th}, \!, empty \text{}, dollars, unescaped quotes, \displaystyle.
std::string remove_noise(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const char c = s[i];
    if (c == '\\') {
      if (starts_with(s, i, "\\mathrm{th}")) { i += 11; continue; }
      if (starts_with(s, i, "\\!")) { i = scan::skip_spaces(s, i + 2); continue; }
      if (starts_with(s, i, "\\text")) {
        size_t j = scan::skip_spaces(s, i + 5);
        if (j < n && s[j] == '{') {
          j = scan::skip_spaces(s, j + 1);
          if (j < n && s[j] == '}') { i = j + 1; continue; }
        }
      }
      if (starts_with(s, i, "\\$")) { i += 2; continue; }
      if (starts_with(s, i, "\\displaystyle")) { i += 13; continue; }
    }
    if (c == '$') { ++i; continue; }
    if ((c == '"' || c == '\'') && !(i > 0 && s[i - 1] == '\\')) { ++i; continue; }
    out.push_back(c);
    ++i;
  }
  return out;
}

// `\s*\bWORD\b` at i; returns the match length or 0.
size_t match_spaced_word(std::string_view s, size_t i, std::string_view word) {
  size_t j = scan::skip_spaces(s, i);
  if (!starts_with(s, j, word)) return 0;
  if (j > 0 && scan::is_word(s[j - 1])) return 0;
  size_t k = j + word.size();
  if (k < s.size() && scan::is_word(s[k])) return 0;
  return k - i;
}

// (?<![a-zA-Z])(,?\s*(?:and|or))(?![a-zA-Z])
size_t match_and_or(std::string_view s, size_t i) {
  if (i > 0 && is_alpha(s[i - 1])) return 0;
  size_t j = i;
  if (j < s.size() && s[j] == ',') ++j;
  j = scan::skip_spaces(s, j);
  size_t k;
  if (starts_with(s, j, "and")) k = j + 3;
  else if (starts_with(s, j, "or")) k = j + 2;
  else return 0;
  if (k < s.size() && is_alpha(s[k])) return 0;
  return k - i;
}

// ,?\s*\\text{\s*(?:and|or)\s*}
size_t match_and_or_text(std::string_view s, size_t i) {
  size_t j = i;
  if (j < s.size() && s[j] == ',') ++j;
  j = scan::skip_spaces(s, j);
  if (!starts_with(s, j, "\\text{")) return 0;
  j = scan::skip_spaces(s, j + 6);
  if (starts_with(s, j, "and")) j += 3;
  else if (starts_with(s, j, "or")) j += 2;
  else return 0;
  j = scan::skip_spaces(s, j);
  if (j >= s.size() || s[j] != '}') return 0;
  return j + 1 - i;
}

// \s*\{\s*,\s*\}
size_t match_brace_comma(std::string_view s, size_t i) {
  size_t j = scan::skip_spaces(s, i);
  if (j >= s.size() || s[j] != '{') return 0;
  j = scan::skip_spaces(s, j + 1);
  if (j >= s.size() || s[j] != ',') return 0;
  j = scan::skip_spaces(s, j + 1);
  if (j >= s.size() || s[j] != '}') return 0;
  return j + 1 - i;
}

// One left-to-right pass of the replacement table; at each position the
// alternatives are tried in the table's order, like a regex alternation.
std::string replace_commands(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 16);
  size_t i = 0;
  const size_t n = s.size();
  auto emit = [&](std::string_view rep, size_t len) {
    out.append(rep);
    i += len;
  };
  while (i < n) {
    const char c = s[i];
    size_t m = 0;
    if (c == '\\') {
      if (starts_with(s, i, "\\mathrm") || starts_with(s, i, "\\mathit") ||
          starts_with(s, i, "\\mathbf")) { emit("\\text", 7); continue; }
      if (starts_with(s, i, "\\textnormal")) { emit("\\text", 11); continue; }
      if (starts_with(s, i, "\\textbf") || starts_with(s, i, "\\textit") ||
          starts_with(s, i, "\\textrm")) { emit("\\text", 7); continue; }
      if (starts_with(s, i, "\\dfrac") || starts_with(s, i, "\\tfrac") ||
          starts_with(s, i, "\\cfrac")) { emit("\\frac", 6); continue; }
    }
    if (is_space(c) && i + 1 < n && s[i + 1] == '.') { emit(" 0.", 2); continue; }
    if (c == '{' && i + 1 < n && s[i + 1] == '.') { emit("{0.", 2); continue; }
    if (c == '~' && i + 1 < n && s[i + 1] == '=') { emit("\\approx", 2); continue; }
    if ((m = match_brace_comma(s, i))) { emit(",", m); continue; }
    if ((m = match_and_or(s, i))) { emit(",", m); continue; }
    if ((m = match_and_or_text(s, i))) { emit(",", m); continue; }
    if (c == '\\' && i + 1 < n && is_space(s[i + 1]) && !(i > 0 && s[i - 1] == '\\')) {
      emit(" ", 2);
      continue;
    }
    if (starts_with(s, i, "infinity")) { emit("\\infty", 8); continue; }
    if (c == ',' && starts_with(s, i + 1, "\\ldots")) { emit(" ", 7); continue; }
    if (starts_with(s, i, "\\ldots")) { emit(" ", 6); continue; }
    if ((m = match_spaced_word(s, i, "percentage"))) { emit("%", m); continue; }
    if ((m = match_spaced_word(s, i, "percent"))) { emit("%", m); continue; }
    if ((m = match_spaced_word(s, i, "pct"))) { emit("%", m); continue; }
    if (starts_with(s, i, "\\text{percent}")) { emit("%", 14); continue; }
    if (starts_with(s, i, "\\text{pct}")) { emit("%", 10); continue; }
    if (starts_with(s, i, "\\text{percentage}")) { emit("%", 17); continue; }
    if (starts_with(s, i, "inf") && !(i > 0 && s[i - 1] == '\\') && !starts_with(s, i + 3, "inity")) {
      emit("\\infty", 3);
      continue;
    }
    if (c == ' ' && starts_with(s, i + 1, "sqrt")) { emit("\\sqrt", 5); continue; }
    out.push_back(c);
    ++i;
  }
  return out;
}

std::string basic_latex(std::string text) {
  text = scan::replace_all(text, "\\mathrm{T}", "T");
  text = scan::replace_all(text, "\\mathrm{d}", "d");
  text = scan::replace_all(text, "{\\rm d}", "d");
  text = scan::replace_all(text, "\\left[\\begin{matrix}", "\\begin{bmatrix}");
  text = scan::replace_all(text, "\\end{matrix}\\right]", "\\end{bmatrix}");
  text = strip_left_right(text);
  text = remove_noise(text);
  text = replace_commands(text);
  for (char& c : text) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  // "\\frac" written with a doubled backslash (not in matrices, where \\ is a row break).
  if (text.find("matrix") == std::string::npos) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\\' && i + 2 < text.size() && text[i + 1] == '\\' && is_alpha(text[i + 2])) {
        continue;
      }
      out.push_back(text[i]);
    }
    text.swap(out);
  }
  return text;
}

}  // namespace

std::string extract_boxed_content(std::string_view text, BoxedMode mode) {
  std::vector<std::string_view> results;
  size_t current = text.size();
  size_t max_pos = text.size();
  bool have_last_start = false;
  size_t last_start = 0;
  while (true) {
    const size_t b = rfind_before(text, "\\boxed", current);
    const size_t f = rfind_before(text, "\\fbox", current);
    if (b == std::string_view::npos && f == std::string_view::npos) break;
    size_t start;
    size_t cmd_end;
    if (f == std::string_view::npos || (b != std::string_view::npos && b > f)) {
      start = b;
      cmd_end = b + 6;
    } else {
      start = f;
      cmd_end = f + 5;
    }
    size_t next = cmd_end;
    while (next < max_pos && is_space(text[next])) ++next;
    if (next >= max_pos) break;
    if (text[next] != '{') {
      if (results.empty()) results.push_back(text.substr(next));
      break;
    }
    const size_t close = closing_brace(text, next, max_pos);
    if (close == std::string_view::npos) {
      if (results.empty()) results.push_back(text.substr(next));
      break;
    }
    const std::string_view content = scan::trim(text.substr(next + 1, close - next - 1));
    if (mode == BoxedMode::Last && have_last_start) {
      const std::string_view following = results.empty() ? std::string_view() : results.back();
      const std::string_view between = text.substr(close + 1, last_start - (close + 1));
      const bool keep = between.size() < 10 ||
                        (following != content && between.size() < 70 && has_list_separator(between));
      if (!keep) break;
    }
    if (results.empty() || results.back() != content) results.push_back(content);
    have_last_start = true;
    last_start = start;
    max_pos = start;
    current = start;
  }
  if (results.empty()) return std::string(text);
  std::string out;
  for (size_t k = results.size(); k-- > 0;) {
    out.append(results[k]);
    if (k) out.push_back(',');
  }
  return out;
}

std::string normalize_latex(std::string_view input, const NormalizeConfig& cfg) {
  std::string text(input);
  if (cfg.boxed != BoxedMode::None) text = extract_boxed_content(text, cfg.boxed);
  if (cfg.basic_latex) text = basic_latex(std::move(text));
  if (cfg.units) text = detail::strip_units(std::move(text));
  if (cfg.nits) {
    if (!text.empty() && text[0] == '.') text.insert(text.begin(), '0');
    if (text == "0.5") text = "\\frac{1}{2}";
  }
  if (cfg.malformed_operators) text = detail::fix_malformed_operators(std::move(text));
  return std::string(scan::trim(text));
}

}  // namespace grpo::math
