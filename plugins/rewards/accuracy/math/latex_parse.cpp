#include "latex_parse.h"

#include <string>
#include <vector>

#include "latex_lexer.h"
#include "latex_parser.h"
#include "text_scan.h"

namespace grpo::math {
namespace {

using latex_detail::ParseError;
using latex_detail::Parser;
using T = Node::Type;

// ^\s*-?\d{1,3}(,\d{3})+(\.\d+)?\s*$  -> the number without separators
std::optional<std::string> comma_number(std::string_view s) {
  s = scan::trim(s);
  std::string out;
  size_t i = 0;
  if (i < s.size() && s[i] == '-') out.push_back(s[i++]);
  size_t lead = 0;
  while (i < s.size() && scan::is_digit(s[i])) out.push_back(s[i++]), ++lead;
  if (lead < 1 || lead > 3) return std::nullopt;
  int groups = 0;
  while (i + 3 < s.size() && s[i] == ',' && scan::is_digit(s[i + 1]) && scan::is_digit(s[i + 2]) &&
         scan::is_digit(s[i + 3])) {
    out.append(s.substr(i + 1, 3));
    i += 4;
    ++groups;
  }
  if (groups == 0) return std::nullopt;
  if (i < s.size() && s[i] == '.') {
    size_t j = i + 1;
    while (j < s.size() && scan::is_digit(s[j])) ++j;
    if (j == i + 1) return std::nullopt;
    out.append(s.substr(i, j - i));
    i = j;
  }
  if (i != s.size()) return std::nullopt;
  return out;
}

std::optional<Node> parse_once(std::string_view s) {
  if (auto num = comma_number(s)) return number_node(*num);
  std::vector<Token> toks;
  if (!lex_latex(s, &toks)) return std::nullopt;
  // A trailing full stop ends a sentence, not the number.
  if (toks.size() >= 2 && toks[toks.size() - 2].kind == Tok::Period) toks.erase(toks.end() - 2);
  try {
    Parser p(std::move(toks));
    return p.parse_math();
  } catch (const ParseError&) {
    return std::nullopt;
  }
}

}  // namespace

Node number_node(std::string_view literal) {
  bool negative = false;
  if (!literal.empty() && literal[0] == '-') {
    negative = true;
    literal.remove_prefix(1);
  }
  std::string digits(literal);
  if (!digits.empty() && digits[0] == '.') digits.insert(digits.begin(), '0');
  Node n = Node::leaf(T::Number, std::move(digits));
  return negative ? latex_detail::neg(std::move(n)) : n;
}

bool node_only_symbols(const Node& n) {
  switch (n.type) {
    case T::Symbol: return true;
    case T::Mul: case T::Div:
      return std::all_of(n.kids.begin(), n.kids.end(), node_only_symbols);
    default: return false;
  }
}

bool node_is_int_literal(const Node& n) {
  if (n.type == T::Neg) return node_is_int_literal(n.kids[0]);
  return latex_detail::is_positive_int(n);
}

bool node_is_atomic(const Node& n) {
  switch (n.type) {
    case T::Number: return true;
    case T::Neg: return node_is_atomic(n.kids[0]);
    case T::Div: return n.int_frac;
    case T::Add: return n.mixed;
    case T::Percent: return n.kids[0].type == T::Number;
    default: return false;
  }
}

bool node_is_float(const Node& n) {
  switch (n.type) {
    case T::Number: return n.text.find('.') != std::string::npos;
    case T::Neg: case T::Percent: return node_is_float(n.kids[0]);
    default: return false;
  }
}

bool node_is_percent_of_whole(const Node& n) {
  return n.type == T::Percent && n.kids[0].type == T::Number && !node_is_float(n.kids[0]);
}

bool node_has_percent(const Node& n) {
  if (n.type == T::Neg) return node_has_percent(n.kids[0]);
  return n.type == T::Percent;
}

std::optional<Node> parse_latex(std::string_view normalized) {
  if (auto n = parse_once(normalized)) return n;
  // Like Math-Verify, retry a chain "a = b = c" on its last part.
  if (normalized.find(',') != std::string_view::npos || normalized.find(';') != std::string_view::npos) {
    return std::nullopt;
  }
  size_t parts = 1, last = 0;
  for (size_t k = 0; k < normalized.size(); ++k) {
    if (normalized[k] != '=') continue;
    if (k > 0 && (normalized[k - 1] == '\\' || normalized[k - 1] == '<' || normalized[k - 1] == '!' ||
                  normalized[k - 1] == '>')) {
      continue;
    }
    ++parts;
    last = k + 1;
  }
  if (parts <= 2) return std::nullopt;
  return parse_once(normalized.substr(last));
}

}  // namespace grpo::math
