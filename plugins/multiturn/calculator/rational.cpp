#include "rational.h"

#include <cctype>
#include <cstdlib>
#include <numeric>

namespace grpo::calculator {

namespace {

[[noreturn]] void overflow() { throw ExpressionError("the result does not fit in 64 bits"); }
int64_t mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}
int64_t add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}

Rational make(int64_t num, int64_t den) {
  if (den == 0) throw ExpressionError("division by zero");
  if (den < 0) num = mul(num, -1), den = mul(den, -1);
  const int64_t g = std::gcd(num < 0 ? -num : num, den);
  return {num / (g ? g : 1), den / (g ? g : 1)};
}

Rational operator+(Rational a, Rational b) {
  const int64_t g = std::gcd(a.den, b.den);
  return make(add(mul(a.num, b.den / g), mul(b.num, a.den / g)), mul(a.den, b.den / g));
}
Rational operator-(Rational a) { return {mul(a.num, -1), a.den}; }
Rational operator*(Rational a, Rational b) {
  const int64_t g1 = std::gcd(a.num < 0 ? -a.num : a.num, b.den), g2 = std::gcd(b.num < 0 ? -b.num : b.num, a.den);
  return make(mul(a.num / (g1 ? g1 : 1), b.num / (g2 ? g2 : 1)), mul(a.den / (g2 ? g2 : 1), b.den / (g1 ? g1 : 1)));
}
Rational operator/(Rational a, Rational b) {
  if (b.num == 0) throw ExpressionError("division by zero");
  return a * make(b.den, b.num);
}

// expr := term (('+'|'-') term)*; term := unary (('*'|'/') unary)*;
// unary := ('-'|'+') unary | power; power := atom ('^' unary)?; atom := number | '(' expr ')'
class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Rational parse() {
    Rational r = expr();
    skip();
    if (p_ != s_.size()) fail("unexpected '" + std::string(1, s_[p_]) + "'");
    return r;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw ExpressionError(why + " at position " + std::to_string(p_) + " of \"" + std::string(s_) + "\"");
  }
  void skip() {
    while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[p_]))) ++p_;
  }
  bool eat(char c) {
    skip();
    if (p_ < s_.size() && s_[p_] == c) return ++p_, true;
    return false;
  }
  Rational expr() {
    Rational r = term();
    for (;;) {
      if (eat('+')) r = r + term();
      else if (eat('-')) r = r + -term();
      else return r;
    }
  }
  Rational term() {
    Rational r = unary();
    for (;;) {
      if (eat('*')) r = r * unary();
      else if (eat('/')) r = r / unary();
      else return r;
    }
  }
  Rational unary() {
    if (eat('-')) return -unary();
    if (eat('+')) return unary();
    return power();
  }
  Rational power() {
    Rational base = atom();
    if (!eat('^')) return base;
    const Rational e = unary();
    if (e.den != 1 || e.num < 0 || e.num > 64) fail("an exponent must be an integer from 0 to 64");
    Rational r{1, 1};
    for (int64_t i = 0; i < e.num; ++i) r = r * base;
    return r;
  }
  Rational atom() {
    if (eat('(')) {
      Rational r = expr();
      if (!eat(')')) fail("missing ')'");
      return r;
    }
    skip();
    const size_t start = p_;
    int64_t num = 0, den = 1;
    bool digits = false, point = false;
    for (; p_ < s_.size(); ++p_) {
      const char c = s_[p_];
      if (c == '.' && !point) {
        point = true;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        digits = true;
        num = add(mul(num, 10), c - '0');
        if (point) den = mul(den, 10);
      } else if (c == ',' && !point && digits) {
        continue;  // 1,000
      } else {
        break;
      }
    }
    if (!digits) {
      p_ = start;
      fail(p_ < s_.size() ? "unexpected '" + std::string(1, s_[p_]) + "'" : "a number is missing");
    }
    return make(num, den);
  }

  std::string_view s_;
  size_t p_ = 0;
};

}  // namespace

Rational evaluate(std::string_view expression) { return Parser(expression).parse(); }

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
  __int128 scaled = static_cast<__int128>(r.num) * (scale / r.den);
  const bool negative = scaled < 0;
  if (negative) scaled = -scaled;
  const auto whole = static_cast<int64_t>(scaled / scale), frac = static_cast<int64_t>(scaled % scale);
  std::string f = std::to_string(frac);
  f.insert(0, static_cast<size_t>(places) - f.size(), '0');
  while (!f.empty() && f.back() == '0') f.pop_back();
  return (negative ? "-" : "") + std::to_string(whole) + "." + f;
}

}  // namespace grpo::calculator
