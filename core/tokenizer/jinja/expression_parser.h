// The expression half of the template parser (parser.cpp derives its statement
// parser from it), in jinja2's precedence: or, and, not, compare, + -, ~, * / // %, **.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/token_stream.h"

namespace grpo::tok::jinja {

class ExpressionParser : public TokenStream {
 public:
  using TokenStream::TokenStream;

 protected:
  using K = Expr::Kind;

  // --- Expressions --------------------------------------------------------------

  bool tuple_end(const std::vector<std::string>& extra_end) const {
    if (cur().type == TokenType::VariableEnd || cur().type == TokenType::BlockEnd || is_op(")")) return true;
    return cur().type == TokenType::Name && std::find(extra_end.begin(), extra_end.end(), cur().text) != extra_end.end();
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr, const std::vector<std::string>& extra_end,
                      bool explicit_parentheses) {
    int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (tuple_end(extra_end)) break;
      items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses) fail("expected an expression, got " + describe(cur()));
    }
    auto e = std::make_unique<Expr>(K::Tuple, line);
    e->items = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    Nest nest(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      int line = next().line;
      auto e = std::make_unique<Expr>(K::Conditional, line);
      e->a = parse_or();
      if (skip_name("else")) e->c = parse_condexpr();
      e->b = std::move(expr);
      expr = std::move(e);
    }
    return expr;
  }

  ExprPtr binary(const std::string& op, ExprPtr left, ExprPtr right, int line) {
    auto e = std::make_unique<Expr>(K::Binary, line);
    e->name = op;
    e->a = std::move(left);
    e->b = std::move(right);
    return e;
  }

  // One left-associative level: operands from `operand`, joined while
  // `at_operator` is true; the operator is the token's text.
  template <class Operand, class AtOperator>
  ExprPtr left_assoc(Operand operand, AtOperator at_operator) {
    ExprPtr left = operand();
    while (at_operator()) {
      const Token& t = next();
      left = binary(t.text, std::move(left), operand(), t.line);
    }
    return left;
  }

  ExprPtr parse_or() {
    return left_assoc([this] { return parse_and(); }, [this] { return is_name("or"); });
  }

  ExprPtr parse_and() {
    return left_assoc([this] { return parse_not(); }, [this] { return is_name("and"); });
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      int line = next().line;
      auto e = std::make_unique<Expr>(K::Unary, line);
      e->name = "not";
      Nest nest(*this);
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr first = parse_math1();
    std::unique_ptr<Expr> cmp;
    while (true) {
      std::string op;
      if (cur().type == TokenType::Operator &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" || cur().text == ">" ||
           cur().text == ">=")) {
        op = next().text;
      } else if (skip_name("in")) {
        op = "in";
      } else if (is_name("not") && look().type == TokenType::Name && look().text == "in") {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = std::make_unique<Expr>(K::Compare, line);
        cmp->a = std::move(first);
      }
      cmp->ops.push_back(op);
      cmp->items.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    return left_assoc([this] { return parse_concat(); }, [this] { return is_op("+") || is_op("-"); });
  }

  ExprPtr parse_concat() {
    return left_assoc([this] { return parse_math2(); }, [this] { return is_op("~"); });
  }

  ExprPtr parse_math2() {
    return left_assoc([this] { return parse_pow(); },
                      [this] { return is_op("*") || is_op("/") || is_op("//") || is_op("%"); });
  }

  ExprPtr parse_pow() {
    return left_assoc([this] { return parse_unary(true); }, [this] { return is_op("**"); });
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      node = std::make_unique<Expr>(K::Unary, t.line);
      node->name = t.text;
      Nest nest(*this);
      node->a = parse_unary(false);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    int line = t.line;
    if (t.type == TokenType::Name) {
      next();
      if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
        auto e = std::make_unique<Expr>(K::Constant, line);
        e->value = Value(t.text == "true" || t.text == "True");
        return e;
      }
      if (t.text == "none" || t.text == "None") {
        auto e = std::make_unique<Expr>(K::Constant, line);
        e->value = Value::none();
        return e;
      }
      auto e = std::make_unique<Expr>(K::Name, line);
      e->name = t.text;
      return e;
    }
    if (t.type == TokenType::String) {
      std::string s;
      while (cur().type == TokenType::String) s += next().text;  // adjacent literals concatenate
      auto e = std::make_unique<Expr>(K::Constant, line);
      e->value = Value(std::move(s));
      return e;
    }
    if (t.type == TokenType::Integer || t.type == TokenType::Float) {
      next();
      auto e = std::make_unique<Expr>(K::Constant, line);
      e->value = t.type == TokenType::Integer ? Value::integer(t.integer) : Value(t.number);
      return e;
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(false, true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      auto e = std::make_unique<Expr>(K::List, line);
      while (!is_op("]")) {
        if (!e->items.empty()) expect_op(",");
        if (is_op("]")) break;
        e->items.push_back(parse_expression(true));
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      next();
      auto e = std::make_unique<Expr>(K::Dict, line);
      while (!is_op("}")) {
        if (!e->items.empty()) expect_op(",");
        if (is_op("}")) break;
        e->items.push_back(parse_expression(true));
        expect_op(":");
        e->items.push_back(parse_expression(true));
      }
      expect_op("}");
      return e;
    }
    fail("unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
      else if (is_op("(")) node = parse_call(std::move(node));
      else return node;
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        next();
        node = parse_filter_call(std::move(node));
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = next();
    if (t.text == ".") {
      const Token& attr = next();
      if (attr.type == TokenType::Name) {
        auto e = std::make_unique<Expr>(K::GetAttr, t.line);
        e->a = std::move(node);
        e->name = attr.text;
        return e;
      }
      if (attr.type != TokenType::Integer) throw JinjaError("expected a name or number after '.'", attr.line);
      auto key = std::make_unique<Expr>(K::Constant, attr.line);
      key->value = Value::integer(attr.integer);
      auto e = std::make_unique<Expr>(K::GetItem, t.line);
      e->a = std::move(node);
      e->b = std::move(key);
      return e;
    }
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    if (args.size() == 1 && args[0]->kind == K::Slice) {
      args[0]->a = std::move(node);
      return std::move(args[0]);
    }
    auto e = std::make_unique<Expr>(K::GetItem, t.line);
    e->a = std::move(node);
    if (args.size() == 1) {
      e->b = std::move(args[0]);
    } else {
      auto tuple = std::make_unique<Expr>(K::Tuple, t.line);
      for (auto& arg : args) {
        if (arg->kind == K::Slice) fail("multi-dimensional slicing is not supported");
        tuple->items.push_back(std::move(arg));
      }
      e->b = std::move(tuple);
    }
    return e;
  }

  // One subscript: an expression, or a slice `start:stop:step` (`a` is filled in by the caller).
  ExprPtr parse_subscribed() {
    int line = cur().line;
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_expression(true);
      if (!is_op(":")) return start;
    }
    next();
    auto s = std::make_unique<Expr>(K::Slice, line);
    s->b = std::move(start);
    if (!is_op(":") && !is_op("]") && !is_op(",")) s->c = parse_expression(true);
    if (skip_op(":")) {
      if (!is_op("]") && !is_op(",")) s->items.push_back(parse_expression(true));
    }
    return s;
  }

  ArgList parse_call_args() {
    ArgList args;
    expect_op("(");
    bool need_comma = false;
    while (!is_op(")")) {
      if (need_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (skip_op("*")) {
        if (args.star || args.star_star) fail("invalid syntax for function call expression");
        args.star = parse_expression(true);
      } else if (skip_op("**")) {
        if (args.star_star) fail("invalid syntax for function call expression");
        args.star_star = parse_expression(true);
      } else if (cur().type == TokenType::Name && look().type == TokenType::Operator && look().text == "=") {
        if (args.star_star) fail("invalid syntax for function call expression");
        std::string key = next().text;
        next();
        args.keyword.emplace_back(key, parse_expression(true));
      } else {
        if (args.star || args.star_star || !args.keyword.empty()) fail("positional argument follows keyword argument");
        args.positional.push_back(parse_expression(true));
      }
      need_comma = true;
    }
    expect_op(")");
    return args;
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = std::make_unique<Expr>(K::Call, cur().line);
    e->a = std::move(node);
    e->args = parse_call_args();
    return e;
  }

  // After the `|`: name(.name)* [(args)].
  ExprPtr parse_filter_call(ExprPtr node) {
    int line = cur().line;
    auto e = std::make_unique<Expr>(K::Filter, line);
    e->name = expect_name();
    while (skip_op(".")) e->name += "." + expect_name();
    if (is_op("(")) e->args = parse_call_args();
    e->a = std::move(node);
    return e;
  }

  ExprPtr parse_test(ExprPtr node) {
    int line = next().line;  // `is`
    auto e = std::make_unique<Expr>(K::Test, line);
    e->negated = skip_name("not");
    e->name = expect_name();
    while (skip_op(".")) e->name += "." + expect_name();
    const Token& t = cur();
    bool bare_argument =
        (t.type == TokenType::Name || t.type == TokenType::String || t.type == TokenType::Integer ||
         t.type == TokenType::Float || is_op("[") || is_op("{")) &&
        !(t.type == TokenType::Name && (t.text == "else" || t.text == "or" || t.text == "and"));
    if (is_op("(")) {
      e->args = parse_call_args();
    } else if (bare_argument) {
      if (is_name("is")) fail("you cannot chain multiple tests with is");
      e->args.positional.push_back(parse_postfix(parse_primary()));
    }
    e->a = std::move(node);
    return e;
  }
};

}  // namespace grpo::tok::jinja
