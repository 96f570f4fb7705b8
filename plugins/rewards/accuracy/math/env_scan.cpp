#include "env_scan.h"

#include "text_scan.h"

namespace grpo::math {
namespace {

using scan::is_digit;
using scan::is_space;
using scan::starts_with;

// \\?%|[Pp]ercent|[Pp]ercentage|[Pp]ct after the environment; returns the end or 0.
size_t percent_at(std::string_view t, size_t i) {
  if (starts_with(t, i, "\\%")) return i + 2;
  if (starts_with(t, i, "%")) return i + 1;
  if (starts_with(t, i, "percent") || starts_with(t, i, "Percent")) return i + 7;
  if (starts_with(t, i, "pct") || starts_with(t, i, "Pct")) return i + 3;
  return 0;
}

// "\boxed{" followed by at least one character and a "}" inside [cs, ce).
bool holds_boxed(std::string_view t, size_t cs, size_t ce) {
  const std::string_view c = t.substr(cs, ce - cs);
  const size_t k = c.find("\\boxed{");
  if (k == std::string_view::npos) return false;
  const size_t close = c.rfind('}');
  return close != std::string_view::npos && close >= k + 8;
}

// -?\d+(?:[.,]\d+)?  ; returns the end or npos
size_t simple_number(std::string_view t, size_t i) {
  if (i < t.size() && t[i] == '-') ++i;
  const size_t d = i;
  while (i < t.size() && is_digit(t[i])) ++i;
  if (i == d) return std::string_view::npos;
  if (i + 1 < t.size() && (t[i] == '.' || t[i] == ',') && is_digit(t[i + 1])) {
    i += 2;
    while (i < t.size() && is_digit(t[i])) ++i;
  }
  return i;
}

// -?\\frac{num}{num}
size_t bare_fraction(std::string_view t, size_t pos) {
  size_t i = pos;
  if (i < t.size() && t[i] == '-') ++i;
  if (!starts_with(t, i, "\\frac{")) return 0;
  i = simple_number(t, i + 6);
  if (i == std::string_view::npos || !starts_with(t, i, "}{")) return 0;
  i = simple_number(t, i + 2);
  if (i == std::string_view::npos || !starts_with(t, i, "}")) return 0;
  return i + 1;
}

bool finish(std::string_view t, size_t pos, size_t cs, size_t ce, size_t close_end, EnvContext ctx, Env* out) {
  if (ctx == EnvContext::Boxed && !holds_boxed(t, cs, ce)) return false;
  size_t e = scan::skip_spaces(t, close_end);
  const size_t p = percent_at(t, e);
  out->percent = p != 0;
  if (p) e = p;
  out->start = pos;
  out->end = e;
  out->cs = cs;
  out->ce = ce;
  return true;
}

}  // namespace

bool env_at(std::string_view t, size_t pos, EnvContext ctx, Env* out) {
  const size_t n = t.size();
  if (pos >= n) return false;
  const char c = t[pos];
  const bool escaped = pos > 0 && t[pos - 1] == '\\';
  if (c == '$') {
    if (!escaped && pos + 1 < n && t[pos + 1] == '$') {
      // $$ ... $$ : the content may hold single dollars, not "$$".
      for (size_t i = pos + 2; i < n; ++i) {
        if (t[i] == '$' && i + 1 < n && t[i + 1] == '$') {
          if (i > pos + 2 && t[i - 1] != '\\' && finish(t, pos, pos + 2, i, i + 2, ctx, out)) return true;
          break;
        }
      }
    }
    // $ ... $ : one line, escaped dollars allowed, not right after a digit.
    if (!escaped && !(pos > 0 && is_digit(t[pos - 1]))) {
      size_t i = pos + 1;
      while (i < n) {
        const char d = t[i];
        if (d == '$') {
          if (i > pos + 1 && t[i - 1] != '\\' && finish(t, pos, pos + 1, i, i + 1, ctx, out)) return true;
          break;
        }
        if (d == '\n') break;
        i += (d == '\\' && i + 1 < n && t[i + 1] == '$') ? 2 : 1;
      }
    }
    return false;
  }
  if (c == '\\' && pos + 1 < n && !escaped && (t[pos + 1] == '[' || t[pos + 1] == '(')) {
    const bool display = t[pos + 1] == '[';
    const char closer = display ? ']' : ')';
    for (size_t i = pos + 2; i < n; ++i) {
      if (!display && t[i] == '\n') break;
      if (t[i] == '\\' && i + 1 < n && t[i + 1] == closer) {
        if (i > pos + 2 && t[i - 1] != '\\' && finish(t, pos, pos + 2, i, i + 2, ctx, out)) return true;
        break;
      }
    }
    return false;
  }
  if (is_space(c) && pos + 1 < n && t[pos + 1] == '[') {
    // " [ ... ] " on one line, no nested brackets.
    size_t i = pos + 2;
    while (i < n && t[i] != '\n' && t[i] != ']' && t[i] != '[') ++i;
    if (i < n && t[i] == ']' && i > pos + 2 && i + 1 < n && is_space(t[i + 1])) {
      return finish(t, pos, pos + 2, i, i + 2, ctx, out);
    }
    return false;
  }
  if (ctx == EnvContext::Plain && (c == '-' || c == '\\')) {
    const size_t e = bare_fraction(t, pos);
    if (e) return finish(t, pos, pos, e, e, ctx, out);
  }
  return false;
}

namespace {

bool env_after_spaces(std::string_view t, size_t pos, EnvContext ctx, Env* out) {
  const size_t r = scan::skip_spaces(t, pos);
  if (env_at(t, r, ctx, out)) return true;
  // A regex would give one space back for the " [ ... ] " form.
  return r > pos && env_at(t, r - 1, ctx, out);
}

}  // namespace

bool env_chain_at(std::string_view t, size_t pos, EnvContext ctx, std::vector<Env>* envs, size_t* end) {
  envs->clear();
  Env first;
  if (!env_at(t, pos, ctx, &first)) return false;
  envs->push_back(first);
  size_t cur = first.end;
  static const std::string_view kSeps[] = {",and", "and", ",or", "or", ","};
  for (int k = 0; k < 5; ++k) {
    if (ctx == EnvContext::Boxed) cur = scan::skip_spaces(t, cur);
    const size_t q = scan::skip_spaces(t, cur);
    bool linked = false;
    for (std::string_view sep : kSeps) {
      Env next;
      if (starts_with(t, q, sep) && env_after_spaces(t, q + sep.size(), ctx, &next)) {
        envs->push_back(next);
        cur = next.end;
        linked = true;
        break;
      }
    }
    if (!linked) break;
  }
  *end = cur;
  return true;
}

bool env_chain_after_spaces(std::string_view t, size_t pos, EnvContext ctx, std::vector<Env>* envs,
                            size_t* end) {
  const size_t r = scan::skip_spaces(t, pos);
  if (env_chain_at(t, r, ctx, envs, end)) return true;
  return r > pos && env_chain_at(t, r - 1, ctx, envs, end);
}

}  // namespace grpo::math
