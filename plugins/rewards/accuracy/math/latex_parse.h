// LaTeX and plain-expression parsers producing backend-neutral Nodes.
#pragma once

#include <optional>
#include <string_view>

#include "math_ast.h"

namespace grpo::math {

// Parses a normalised LaTeX answer; nullopt when it cannot be read.
std::optional<Node> parse_latex(std::string_view normalized);

// Parses a plain arithmetic expression such as "1/2" or "(3+4)^2" with
// Python operator rules ("^" is a power, no implicit multiplication).
std::optional<Node> parse_plain_expr(std::string_view expr);

// Node for a decimal literal with an optional leading '-'.
Node number_node(std::string_view literal);

// True for a symbol, or products / quotients made only of symbols (an assignment target).
bool node_only_symbols(const Node& n);

// True for an integer literal, optionally negated.
bool node_is_int_literal(const Node& n);

// A plain number: literal, negated literal, \frac of integers, mixed number,
// or a percentage of a literal (Math-Verify's "atomic" numbers).
bool node_is_atomic(const Node& n);

// An atomic number written with a decimal point (compared after rounding).
bool node_is_float(const Node& n);

// A percentage of a whole-number literal ("14\%"): Math-Verify 0.9.0's
// sympy_numeric_eq compares it with a whole number by the number before the
// percent sign ("9% == 9"), so these need telling apart from other percentages.
bool node_is_percent_of_whole(const Node& n);

// A percentage, alone or negated: sympy keeps "-14\%" as -1*14*(1/100), which
// is no longer a percentage of a number and so never compared as a whole one.
bool node_has_percent(const Node& n);

}  // namespace grpo::math
