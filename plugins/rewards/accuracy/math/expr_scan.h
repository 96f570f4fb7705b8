// Matching of plain numbers and arithmetic expressions outside LaTeX, the way
// Math-Verify's ExprExtractionConfig regexes find them (gold answers only).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace grpo::math {

struct ExprHit {
  size_t end = 0;          // one past the match
  bool is_number = false;  // number (text holds its digits) or expression (text holds it raw)
  std::string text;
  bool percent = false;
};

// A number such as "1,000", "-3", "0.75" or "25%", preceded by the start of the
// text, a space or '=' at `s` (a currency sign may follow that prefix).
bool number_with_anchor_at(std::string_view t, size_t s, ExprHit* out);

// An expression such as "1/2" or "(3+4)*2" with the same prefix, which must be
// followed by punctuation, a space, ')' , '$' or the end.
bool expr_with_anchor_at(std::string_view t, size_t s, ExprHit* out);

// Expression first, then number.
bool expr_or_number_at(std::string_view t, size_t s, ExprHit* out);

}  // namespace grpo::math
