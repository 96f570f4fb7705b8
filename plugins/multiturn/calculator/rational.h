// Exact arithmetic for the calculator tool: + - * / ^ and parentheses over
// rationals with 64-bit numerator and denominator, every overflow detected.
// No code is executed: the expression is parsed, nothing else.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace grpo::calculator {

struct Rational {
  int64_t num = 0, den = 1;  // den > 0, gcd(num, den) == 1
};

class ExpressionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Evaluates e.g. "17 * 23 - 4 / (2 + 0.5)". Throws ExpressionError saying
// what is wrong: a character it does not know, unbalanced parentheses,
// division by zero, a result too large for 64 bits.
Rational evaluate(std::string_view expression);

// An integer as "391", else a terminating decimal "0.125" (at most 12
// places), else the reduced fraction "1/3".
std::string format(const Rational& r);

}  // namespace grpo::calculator
