// The parser's cursor over the lexer's tokens: look, take, expect, and fail
// with the current token's line.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/lexer.h"

namespace grpo::tok::jinja {

class TokenStream {
 public:
  explicit TokenStream(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

 protected:
  const Token& cur() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool is_op(const char* op) const { return cur().type == TokenType::Operator && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == TokenType::Name && cur().text == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  [[noreturn]] void fail(const std::string& message) const { throw JinjaError(message, cur().line); }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
  }
  const Token& expect(TokenType type, const char* what) {
    if (cur().type != type) fail(std::string("expected ") + what + ", got " + describe(cur()));
    return next();
  }

  // Counts the parser's own recursion (sub-expressions, unary operators,
  // nested blocks), so that no template can overflow its stack.
  class Nest {
   public:
    explicit Nest(TokenStream& s) : s_(s) {
      if (++s_.nesting_ > kMaxNesting)
        s_.fail("the template nests expressions or blocks more than " + std::to_string(kMaxNesting) + " levels deep");
    }
    ~Nest() { --s_.nesting_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    TokenStream& s_;
  };
  std::string expect_name() { return expect(TokenType::Name, "a name").text; }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int nesting_ = 0;  // see Nest
};

}  // namespace grpo::tok::jinja
