// Plain arithmetic read with Python operator rules, as Math-Verify hands the
// expressions it finds outside LaTeX to sympy's parse_expr.
#include <optional>
#include <string>
#include <vector>

#include "latex_parse.h"
#include "text_scan.h"

namespace grpo::math {
namespace {

using T = Node::Type;

struct PlainError {};

class PlainParser {
 public:
  explicit PlainParser(std::string_view s) : s_(s) {}

  Node parse() {
    Node n = sum();
    skip();
    if (i_ != s_.size()) throw PlainError{};
    return n;
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
  int depth_ = 0;

  void skip() { i_ = scan::skip_spaces(s_, i_); }
  bool peek_is(std::string_view p) {
    skip();
    return scan::starts_with(s_, i_, p);
  }
  void enter() {
    if (++depth_ > 100) throw PlainError{};
  }

  Node sum() {
    enter();
    Node left = product();
    while (true) {
      if (peek_is("+")) {
        ++i_;
        left = Node::make(T::Add, {std::move(left), product()});
      } else if (peek_is("-")) {
        ++i_;
        left = Node::make(T::Add, {std::move(left), Node::make(T::Neg, {product()})});
      } else {
        --depth_;
        return left;
      }
    }
  }

  Node product() {
    Node left = unary();
    while (true) {
      if (peek_is("**")) throw PlainError{};
      if (peek_is("*")) {
        ++i_;
        left = Node::make(T::Mul, {std::move(left), unary()});
      } else if (peek_is("/")) {
        ++i_;
        left = Node::make(T::Div, {std::move(left), unary()});
      } else {
        return left;
      }
    }
  }

  Node unary() {
    enter();
    Node r;
    if (peek_is("-")) {
      ++i_;
      r = Node::make(T::Neg, {unary()});
    } else if (peek_is("+")) {
      ++i_;
      r = unary();
    } else {
      r = power();
    }
    --depth_;
    return r;
  }

  // Python: the power binds tighter than a unary minus on its left and is right-associative.
  Node power() {
    Node base = atom();
    if (peek_is("**") || peek_is("^")) {
      i_ += s_[i_] == '^' ? 1 : 2;
      return Node::make(T::Pow, {std::move(base), unary()});
    }
    return base;
  }

  Node atom() {
    skip();
    if (i_ < s_.size() && s_[i_] == '(') {
      ++i_;
      Node inner = sum();
      skip();
      if (i_ >= s_.size() || s_[i_] != ')') throw PlainError{};
      ++i_;
      return inner;
    }
    const size_t start = i_;
    while (i_ < s_.size() && scan::is_digit(s_[i_])) ++i_;
    size_t int_end = i_;
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      while (i_ < s_.size() && scan::is_digit(s_[i_])) ++i_;
    }
    if (i_ == start || (int_end == start && i_ == start + 1)) throw PlainError{};
    std::string lit(s_.substr(start, i_ - start));
    if (lit.back() == '.') lit.pop_back();
    return number_node(lit);
  }
};

}  // namespace

std::optional<Node> parse_plain_expr(std::string_view expr) {
  try {
    PlainParser p(expr);
    return p.parse();
  } catch (const PlainError&) {
    return std::nullopt;
  }
}

}  // namespace grpo::math
