// Recursive-descent parser over lexed LaTeX tokens (internal to the library).
// Grammar rules live in latex_parser.cpp, atoms and commands in latex_parser_atoms.cpp.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "latex_lexer.h"
#include "math_ast.h"

namespace grpo::math::latex_detail {

using T = Node::Type;

struct ParseError {};
constexpr int kMaxDepth = 160;

inline Node neg(Node n) { return Node::make(T::Neg, {std::move(n)}); }

inline Node func(std::string name, std::vector<Node> args) {
  Node f = Node::make(T::Func, std::move(args));
  f.text = std::move(name);
  return f;
}

inline bool is_positive_int(const Node& n) {
  return n.type == T::Number && n.text.find('.') == std::string::npos;
}

inline bool is_function_cmd(const std::string& s) {
  static const char* const kFuncs[] = {"sin", "cos", "tan", "cot", "sec", "csc", "arcsin",
                                       "arccos", "arctan", "sinh", "cosh", "tanh", "log", "ln",
                                       "lg", "exp", "det"};
  return std::any_of(std::begin(kFuncs), std::end(kFuncs), [&](const char* f) { return s == f; });
}

// Throws ParseError on input it cannot read.
class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Node parse_math() {
    bool sep = false;
    auto groups = parse_list(&sep);
    if (!at(Tok::End)) throw ParseError{};
    return set_or_single(std::move(groups), sep);
  }

 private:
  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int abs_depth_ = 0;
  int pm_sign_ = 0;  // sign chosen for \pm while parsing one list element twice

  struct Guard {
    Parser& p;
    explicit Guard(Parser& q) : p(q) {
      if (++p.depth_ > kMaxDepth) throw ParseError{};
    }
    ~Guard() { --p.depth_; }
  };

  const Token& peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool at(Tok k) const { return peek().kind == k; }
  bool accept(Tok k) {
    if (!at(k)) return false;
    ++i_;
    return true;
  }
  void expect(Tok k) {
    if (!accept(k)) throw ParseError{};
  }
  bool at_cmd(std::string_view name) const { return at(Tok::Cmd) && peek().text == name; }

  static Node set_or_single(std::vector<std::vector<Node>> groups, bool sep) {
    if (groups.size() == 1) {
      if (groups[0].size() == 1 && !sep) return std::move(groups[0][0]);
      return Node::make(T::Set, std::move(groups[0]));
    }
    std::vector<Node> items;
    for (auto& g : groups) {
      if (g.size() == 1) items.push_back(std::move(g[0]));
      else items.push_back(Node::make(T::Tuple, std::move(g)));
    }
    return Node::make(T::Set, std::move(items));
  }

  static std::vector<Node> flatten(std::vector<std::vector<Node>> groups) {
    std::vector<Node> out;
    for (auto& g : groups) {
      for (auto& n : g) out.push_back(std::move(n));
    }
    return out;
  }

  // Comma / semicolon separated elements up to a closing token (not consumed).
  std::vector<std::vector<Node>> parse_list(bool* had_sep);

  // Does the element starting here contain \pm / \mp?
  bool element_has_pm() const;

  // One element; "a \pm b" yields both a+b and a-b.
  void parse_element(std::vector<Node>* out);

  bool at_relation() const { return at(Tok::Rel) || at(Tok::Approx) || at(Tok::In); }

  Node parse_relation();

  Node parse_setexpr();

  // +1 / -1 when the next token is an additive sign, 0 otherwise.
  int sign_here() const {
    switch (peek().kind) {
      case Tok::Plus: return 1;
      case Tok::Minus: return -1;
      case Tok::PlusMinus: return pm_sign_;
      case Tok::MinusPlus: return -pm_sign_;
      default: return 0;
    }
  }

  Node parse_additive();

  Node parse_term();

  // Can the next token continue an implicit product? "x(x+1)" multiplies here,
  // where Math-Verify's grammar would read a call of a function x.
  bool starts_factor(bool no_func) const {
    const Token& tk = peek();
    switch (tk.kind) {
      case Tok::Number: case Tok::Letter: case Tok::Const: case Tok::Name:
      case Tok::LParen: case Tok::LBrack: case Tok::LBrace: case Tok::LSet:
        return true;
      case Tok::Pipe: return abs_depth_ == 0;
      case Tok::Cmd:
        if (tk.text.compare(0, 4, "end:") == 0 || tk.text == "rfloor" || tk.text == "rceil") return false;
        return !(no_func && is_function_cmd(tk.text));
      default: return false;
    }
  }

  // Unary signs and juxtaposition ("2x", "3\frac{1}{2}"), which binds tighter than * and /.
  Node parse_implicit(bool no_func);

  Node parse_postfix();

  std::string token_text(const Token& tk) const;

  // Raw text of a subscript, used only to name the symbol.
  std::string subscript_text();

  Node parse_power();

  // Exponent: a braced group or a single atom.
  Node parse_script();

  Node parse_braced();

  // Argument of \frac / \sqrt: a braced group, or one digit / one token ("\frac12").
  // The shorthand is read in completions too, which Math-Verify's grammar rejects.
  Node parse_arg();

  // ( ... ) or [ ... ]: a group, an interval (two elements) or a tuple.
  Node parse_group();

  Node parse_function(const std::string& name);

  Node parse_matrix(const std::string& env);

  Node parse_command();

  Node parse_primary();
};

}  // namespace grpo::math::latex_detail
