#include "answer_extract.h"

#include <algorithm>

#include "env_scan.h"
#include "expr_scan.h"
#include "text_scan.h"

namespace grpo::math {
namespace {

using scan::find_ci;
using scan::is_space;
using scan::starts_with;

constexpr size_t npos = std::string_view::npos;

struct Candidate {
  size_t start = 0;
  size_t end = 0;
  Extraction ex;
};

using Candidates = std::vector<Candidate>;

void add_latex(Candidates* out, std::string_view t, size_t start, size_t end, const std::vector<Env>& envs) {
  Candidate c;
  c.start = start;
  c.end = end;
  c.ex.kind = Extraction::Kind::Latex;
  for (const Env& e : envs) {
    LatexPart p;
    p.latex.assign(t.substr(e.cs, e.ce - e.cs));
    p.percent = e.percent;
    c.ex.parts.push_back(std::move(p));
  }
  out->push_back(std::move(c));
}

void add_expr(Candidates* out, size_t start, const ExprHit& h) {
  Candidate c;
  c.start = start;
  c.end = h.end;
  c.ex.kind = h.is_number ? Extraction::Kind::Number : Extraction::Kind::Expr;
  c.ex.text = h.text;
  c.ex.percent = h.percent;
  out->push_back(std::move(c));
}

// (?i:final answer is)\:?\s*BODY\.?\s?I hope
template <class Body>
void final_answer_hope(std::string_view t, Body body, Candidates* out) {
  for (size_t p = find_ci(t, "final answer is", 0); p != npos;) {
    size_t q = p + 15;
    if (q < t.size() && t[q] == ':') ++q;
    size_t e;
    if (body(q, &e)) {
      size_t r = e;
      if (r < t.size() && t[r] == '.') ++r;
      if (r < t.size() && is_space(t[r])) ++r;
      if (starts_with(t, r, "I hope")) {
        out->back().start = p;
        out->back().end = r + 6;
        p = find_ci(t, "final answer is", r + 6);
        continue;
      }
      out->pop_back();
    }
    p = find_ci(t, "final answer is", p + 1);
  }
}

// (?i:final answer.{0,100}?)\s+is\:?BODY
template <class Body>
void final_answer_is(std::string_view t, Body body, Candidates* out) {
  for (size_t p = find_ci(t, "final answer", 0); p != npos;) {
    size_t next = p + 1;
    for (size_t k = 0; k <= 100 && p + 12 + k < t.size(); ++k) {
      const size_t q = p + 12 + k;
      if (!is_space(t[q])) continue;
      size_t r = scan::skip_spaces(t, q);
      if (!starts_with(t, r, "is")) continue;
      r += 2;
      if (r < t.size() && t[r] == ':') ++r;
      size_t e;
      if (body(r, &e)) {
        out->back().start = p;
        next = e;
        break;
      }
    }
    p = find_ci(t, "final answer", next);
  }
}

// (?i:answer)(:)?.{0,50}?BODY   -- lazy gap, first body that matches
template <class Body>
void answer_gap(std::string_view t, bool colon, Body body, Candidates* out) {
  for (size_t p = find_ci(t, "answer", 0); p != npos;) {
    size_t next = p + 1;
    size_t base = p + 6;
    if (!colon || (base < t.size() && t[base] == ':')) {
      if (colon) ++base;
      for (size_t k = 0; k <= 50 && base + k <= t.size(); ++k) {
        size_t e;
        if (body(base + k, &e)) {
          out->back().start = p;
          next = e;
          break;
        }
      }
    }
    p = find_ci(t, "answer", next);
  }
}

// (?i:answer)(:)?(?:.{0,100}=\s*|.{0,50}?)EXPR(?!\s*=)
void answer_expr(std::string_view t, bool colon, Candidates* out) {
  auto body = [&](size_t s, size_t* e) {
    ExprHit h;
    if (!expr_or_number_at(t, s, &h)) return false;
    const size_t r = scan::skip_spaces(t, h.end);
    if (r < t.size() && t[r] == '=') return false;
    add_expr(out, s, h);
    *e = h.end;
    return true;
  };
  for (size_t p = find_ci(t, "answer", 0); p != npos;) {
    size_t next = p + 1;
    size_t base = p + 6;
    bool found = false;
    if (!colon || (base < t.size() && t[base] == ':')) {
      if (colon) ++base;
      // The last '=' within 100 characters, then spaces (one of them is the prefix).
      for (size_t q = std::min(base + 100, t.size() - 1); q + 1 > base && q < t.size() && !found; --q) {
        if (t[q] != '=') continue;
        const size_t r = scan::skip_spaces(t, q + 1);
        size_t e;
        if (r > q + 1 && body(r - 1, &e)) found = true, next = e;
        if (q == 0) break;
      }
      for (size_t k = 0; k <= 50 && !found && base + k <= t.size(); ++k) {
        size_t e;
        if (body(base + k, &e)) found = true, next = e;
      }
    }
    if (found) out->back().start = p;
    p = find_ci(t, "answer", next);
  }
}

void boxed_candidates(std::string_view t, Candidates* out) {
  // Environments holding a \boxed{}, like "$x = \boxed{4}$".
  std::vector<Env> envs;
  for (size_t pos = 0; pos < t.size();) {
    const char c = t[pos];
    size_t end;
    if ((c == '$' || c == '\\' || is_space(c)) && env_chain_at(t, pos, EnvContext::Boxed, &envs, &end)) {
      add_latex(out, t, pos, end, envs);
      pos = end > pos ? end : pos + 1;
    } else {
      ++pos;
    }
  }
  // Bare \boxed{...}: from the first one to the last closing brace of the text.
  for (size_t k = t.find("\\boxed{"); k != npos; k = t.find("\\boxed{", k + 1)) {
    const size_t close = t.rfind('}');
    if (close == npos || close < k + 8) break;
    Candidate cand;
    cand.start = k;
    cand.end = close + 1;
    cand.ex.kind = Extraction::Kind::Latex;
    LatexPart part;
    part.latex.assign(t.substr(k, close + 1 - k));
    part.boxed_region = true;
    cand.ex.parts.push_back(std::move(part));
    out->push_back(std::move(cand));
    break;
  }
}

void plain_latex_candidates(std::string_view t, Candidates* out) {
  std::vector<Env> envs;
  for (size_t pos = 0; pos < t.size();) {
    const char c = t[pos];
    size_t end;
    if ((c == '$' || c == '\\' || c == '-' || is_space(c)) &&
        env_chain_at(t, pos, EnvContext::Plain, &envs, &end)) {
      add_latex(out, t, pos, end, envs);
      pos = end > pos ? end : pos + 1;
    } else {
      ++pos;
    }
  }
}

template <class Match>
void expr_scan_all(std::string_view t, Match match, Candidates* out) {
  for (size_t s = 0; s < t.size();) {
    ExprHit h;
    if ((s == 0 || is_space(t[s]) || t[s] == '=') && match(t, s, &h)) {
      add_expr(out, s, h);
      s = h.end > s ? h.end : s + 1;
    } else {
      ++s;
    }
  }
}

// Candidates of one priority level, in the order Math-Verify's patterns list them.
// In first_match mode only the rightmost-ending match of the first level that
// matched anything is tried:
//   gold:       0 "final answer is $x$ I hope"; 50 "final answer ... is $x$" and \boxed;
//               100 "answer: ... $x$"; 200 "answer ... $x$"; 300 any $x$, bare \frac or number
//   completion: 0 \boxed and "I hope"; then 50, 100, 200 as above; nothing unanchored
Candidates level(std::string_view t, ExtractTarget target, int prio) {
  Candidates out;
  const bool gold = target == ExtractTarget::Gold;
  std::vector<Env> envs;
  auto latex_body = [&](size_t pos, size_t* e) {
    if (!env_chain_after_spaces(t, pos, EnvContext::Plain, &envs, e)) return false;
    add_latex(&out, t, pos, *e, envs);
    return true;
  };
  auto latex_body_exact = [&](size_t pos, size_t* e) {
    if (!env_chain_at(t, pos, EnvContext::Plain, &envs, e)) return false;
    add_latex(&out, t, pos, *e, envs);
    return true;
  };
  auto expr_body = [&](size_t pos, size_t* e) {
    ExprHit h;
    if (!expr_or_number_at(t, pos, &h)) return false;
    add_expr(&out, pos, h);
    *e = h.end;
    return true;
  };
  const int boxed_prio = gold ? 50 : 0;
  switch (prio) {
    case 0:
      final_answer_hope(t, latex_body, &out);
      break;
    case 50:
      final_answer_is(t, latex_body, &out);
      break;
    case 100:
      answer_gap(t, true, latex_body_exact, &out);
      break;
    case 200:
      answer_gap(t, false, latex_body_exact, &out);
      break;
    case 300:
      if (gold) plain_latex_candidates(t, &out);
      break;
    default:
      break;
  }
  if (prio == boxed_prio) boxed_candidates(t, &out);
  if (gold) {
    switch (prio) {
      case 0: {
        // "\s*" then the prefix: the last space before the expression is the prefix.
        auto hope_expr = [&](size_t pos, size_t* e) {
          const size_t r = scan::skip_spaces(t, pos);
          return expr_body(r > pos ? r - 1 : pos, e);
        };
        final_answer_hope(t, hope_expr, &out);
        break;
      }
      case 50: final_answer_is(t, expr_body, &out); break;
      case 100: answer_expr(t, true, &out); break;
      case 200: answer_expr(t, false, &out); break;
      case 300:
        expr_scan_all(t, expr_with_anchor_at, &out);
        expr_scan_all(t, number_with_anchor_at, &out);
        break;
      default: break;
    }
  }
  return out;
}

}  // namespace

Extraction extract_answer(std::string_view text, ExtractTarget target) {
  for (int prio : {0, 50, 100, 200, 300}) {
    Candidates c = level(text, target, prio);
    if (c.empty()) continue;
    // Rightmost end first, then leftmost start; ties keep pattern order.
    std::stable_sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) {
      if (a.end != b.end) return a.end > b.end;
      return a.start < b.start;
    });
    return std::move(c.front().ex);
  }
  return Extraction{};
}

}  // namespace grpo::math
