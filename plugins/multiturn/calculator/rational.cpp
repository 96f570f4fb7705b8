#include "rational.h"

#include <algorithm>
#include <limits>

namespace grpo::calculator {

namespace {

// Operands are 64-bit, so every product and sum of two products below stays
// within 2^127: none of this arithmetic can overflow.
using Wide = __int128;

Wide gcd(Wide a, Wide b) {  // a, b >= 0
  while (b != 0) a %= b, std::swap(a, b);
  return a;
}

}  // namespace

Rational reduced(Wide num, Wide den) {
  if (den == 0) throw ExpressionError("division by zero");
  if (den < 0) num = -num, den = -den;
  const Wide g = gcd(num < 0 ? -num : num, den);  // >= 1: den > 0
  num /= g, den /= g;
  if (num < std::numeric_limits<int64_t>::min() || num > std::numeric_limits<int64_t>::max() ||
      den > std::numeric_limits<int64_t>::max())
    throw ExpressionError("the result does not fit in 64 bits");
  return {static_cast<int64_t>(num), static_cast<int64_t>(den)};
}

Rational operator+(Rational a, Rational b) {
  return reduced(Wide(a.num) * b.den + Wide(b.num) * a.den, Wide(a.den) * b.den);
}
Rational operator-(Rational a, Rational b) {
  return reduced(Wide(a.num) * b.den - Wide(b.num) * a.den, Wide(a.den) * b.den);
}
Rational operator-(Rational a) { return reduced(-Wide(a.num), a.den); }
Rational operator*(Rational a, Rational b) { return reduced(Wide(a.num) * b.num, Wide(a.den) * b.den); }
Rational operator/(Rational a, Rational b) {
  if (b.num == 0) throw ExpressionError("division by zero");
  return reduced(Wide(a.num) * b.den, Wide(a.den) * b.num);
}

std::string format(const Rational& r) {
  if (r.den == 1) return std::to_string(r.num);
  int64_t d = r.den;
  int places = 0;
  while (d % 2 == 0) d /= 2, ++places;
  int fives = 0;
  while (d % 5 == 0) d /= 5, ++fives;
  places = std::max(places, fives);
  if (d != 1 || places > 12) return std::to_string(r.num) + "/" + std::to_string(r.den);
  // Scale to 10^places exactly: the denominator divides it.
  int64_t scale = 1;
  for (int i = 0; i < places; ++i) scale *= 10;
  Wide scaled = static_cast<Wide>(r.num) * (scale / r.den);
  const bool negative = scaled < 0;
  if (negative) scaled = -scaled;
  const auto whole = static_cast<int64_t>(scaled / scale), frac = static_cast<int64_t>(scaled % scale);
  std::string f = std::to_string(frac);
  f.insert(0, static_cast<size_t>(places) - f.size(), '0');
  while (!f.empty() && f.back() == '0') f.pop_back();
  return (negative ? "-" : "") + std::to_string(whole) + "." + f;
}

}  // namespace grpo::calculator
