// The calculator's expression parser: recursive descent, its nesting bounded.
#include <cctype>
#include <utility>

#include "rational.h"
#include "text.h"

namespace grpo::calculator {

namespace {

// Each level of parentheses, sign or power is a few stack frames; a policy's
// 100,000 '(' would overflow the stack of the thread running the handler.
constexpr int kMaxDepth = 200;

// The signs models write for * / - (U+00D7, U+00F7, U+2212).
constexpr std::pair<char, std::string_view> kSigns[] = {{'*', "×"}, {'/', "÷"}, {'-', "−"}};

// A number is read in 128 bits, so that 0.50000000000000000000 still reduces
// to 1/2; past 10^36 (times 10, plus 9, still within 128 bits) it is refused.
constexpr __int128 kMaxDigits = static_cast<__int128>(1'000'000'000'000'000'000) * 1'000'000'000'000'000'000;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// At least `width` hex digits: U+0663, U+1F600.
std::string hex(char32_t value, int width) {
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  for (; value > 0 || static_cast<int>(out.size()) < width; value >>= 4) out.insert(out.begin(), digits[value & 15]);
  return out;
}

// expr := term (('+'|'-') term)*; term := unary (('*'|'/') unary)*;
// unary := ('-'|'+') unary | power; power := atom ('^' unary)?; atom := number | '(' expr ')'
class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Rational parse() {
    Rational r = expr();
    skip();
    if (p_ != s_.size()) fail(unexpected());
    return r;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw ExpressionError(why + " at position " + std::to_string(character_position(s_, p_)) + " of \"" +
                          excerpt(s_, p_) + "\"");
  }
  // The character at p_, named whole: one byte of it would not be UTF-8.
  std::string unexpected() const {
    char32_t cp = 0;
    const size_t n = utf8_length(s_, p_, &cp);
    if (n == 0) return "unexpected byte \\x" + hex(static_cast<unsigned char>(s_[p_]), 2) + " (not UTF-8)";
    if (cp < 0x20 || cp == 0x7F) return "unexpected control character U+" + hex(cp, 4);
    if (n == 1) return "unexpected character \"" + std::string(1, s_[p_]) + "\"";
    return "unexpected character \"" + std::string(s_.substr(p_, n)) + "\" (U+" + hex(cp, 4) + ")";
  }
  void skip() {
    while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[p_]))) ++p_;
  }
  bool eat(char c) {
    skip();
    if (p_ < s_.size() && s_[p_] == c) return ++p_, true;
    for (const auto& [op, sign] : kSigns)
      if (op == c && s_.substr(p_, sign.size()) == sign) return p_ += sign.size(), true;
    return false;
  }
  Rational expr() {
    Rational r = term();
    for (;;) {
      if (eat('+')) r = r + term();
      else if (eat('-')) r = r - term();
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
  // Every recursion (a sign, '(' or '^') passes here, so this bounds them all.
  Rational unary() {
    if (depth_ == kMaxDepth) fail("the expression is nested deeper than " + std::to_string(kMaxDepth) + " levels");
    ++depth_;
    Rational r = eat('-') ? -unary() : eat('+') ? unary() : power();
    --depth_;
    return r;
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
    __int128 num = 0, den = 1;
    bool digits = false, point = false, grouped = false;
    for (; p_ < s_.size(); ++p_) {
      const char c = s_[p_];
      if (c == '.' && !point) {
        point = true;
      } else if (is_digit(c)) {
        digits = true;
        if (num > kMaxDigits || den > kMaxDigits) fail("the number does not fit in 64 bits");
        num = num * 10 + (c - '0');
        if (point) den *= 10;
      } else if (c == ',' && digits) {
        if (point || !groups_thousands(start, !grouped)) not_a_number(start);
        grouped = true;
      } else {
        break;
      }
    }
    if (!digits) {
      p_ = start;
      fail(p_ < s_.size() ? unexpected() : "a number is missing");
    }
    return reduced(num, den);
  }
  // The comma at p_ separates thousands as English writes them: one to three
  // digits (not a leading 0) before the first comma, exactly three after each.
  bool groups_thousands(size_t start, bool first) const {
    if (first && (p_ - start > 3 || s_[start] == '0')) return false;  // only digits precede a first comma
    for (size_t i = 1; i <= 3; ++i)
      if (p_ + i >= s_.size() || !is_digit(s_[p_ + i])) return false;
    return p_ + 4 >= s_.size() || !is_digit(s_[p_ + 4]);
  }
  // Read digit by digit, 0,5 was 5 and 1,,2 was 12: any other comma in a
  // number is refused, naming the number as written.
  [[noreturn]] void not_a_number(size_t start) {
    size_t end = start;
    while (end < s_.size() && (is_digit(s_[end]) || s_[end] == ',' || s_[end] == '.')) ++end;
    const std::string written = excerpt(s_.substr(start, end - start));
    p_ = start;
    fail("\"" + written + "\" is not a number (use a point for decimals: 0.5, not 0,5; a comma may only " +
         "separate thousands: 1,000,000)");
  }

  std::string_view s_;
  size_t p_ = 0;
  int depth_ = 0;
};

}  // namespace

Rational evaluate(std::string_view expression) { return Parser(expression).parse(); }

}  // namespace grpo::calculator
