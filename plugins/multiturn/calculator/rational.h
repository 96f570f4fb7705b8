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

// Evaluates e.g. "17 * 23 - 4 / (2 + 0.5)" (expression.cpp). Also takes the
// signs × ÷ − (U+00D7, U+00F7, U+2212) for * / -, and commas that group
// thousands (1,000,000). Throws ExpressionError saying what is wrong and where
// (a character position): a character it does not know, named whole, a comma
// that is not a thousands separator, unbalanced parentheses, nesting past 200
// levels, division by zero, a result too large for 64 bits.
Rational evaluate(std::string_view expression);

// num / den reduced. Intermediate values are computed in 128 bits, so a result
// is an error only when its reduced form does not fit in 64 bits.
Rational reduced(__int128 num, __int128 den);
Rational operator+(Rational a, Rational b);
Rational operator-(Rational a, Rational b);
Rational operator-(Rational a);
Rational operator*(Rational a, Rational b);
Rational operator/(Rational a, Rational b);

// An integer as "391", else a terminating decimal "0.125" (at most 12
// places), else the reduced fraction "1/3".
std::string format(const Rational& r);

}  // namespace grpo::calculator
