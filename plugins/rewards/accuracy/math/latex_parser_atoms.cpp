// Atoms: numbers, symbols, groups, intervals, commands, functions, matrices.
#include "latex_parser.h"

#include "latex_parse.h"
#include "text_scan.h"

namespace grpo::math::latex_detail {

std::string Parser::token_text(const Token& tk) const {
  switch (tk.kind) {
    case Tok::Number: case Tok::Letter: case Tok::Name: case Tok::Const: case Tok::Cmd: return tk.text;
    case Tok::Plus: return "+";
    case Tok::Minus: return "-";
    case Tok::Comma: return ",";
    case Tok::Star: return "*";
    default: return "?";
  }
}

std::string Parser::subscript_text() {
  if (accept(Tok::LBrace)) {
    std::string s;
    int depth = 0;
    while (!at(Tok::End)) {
      if (at(Tok::LBrace)) ++depth;
      if (at(Tok::RBrace) && depth-- == 0) break;
      s += token_text(peek());
      ++i_;
    }
    expect(Tok::RBrace);
    return s;
  }
  if (at(Tok::Number) || at(Tok::Letter) || at(Tok::Name) || at(Tok::Const)) {
    std::string s = peek().text;
    ++i_;
    return s;
  }
  throw ParseError{};
}

Node Parser::parse_braced() {
  expect(Tok::LBrace);
  Node e = parse_additive();
  expect(Tok::RBrace);
  return e;
}

// \frac, \sqrt and \binom take braced arguments only, as latex2sympy2_extended's
// grammar does: "\frac12" and "\sqrt 2" are repaired before parsing a gold answer
// (malformed_operators), but ms-swift turns that repair off for completions,
// where Math-Verify then cannot parse them and the answer scores 0.
Node Parser::parse_arg() {
  Guard g(*this);
  return parse_braced();
}

Node Parser::parse_group() {
  const Tok open = peek().kind;
  ++i_;
  bool sep = false;
  auto groups = parse_list(&sep);
  const Tok close = peek().kind;
  if (close != Tok::RParen && close != Tok::RBrack) throw ParseError{};
  ++i_;
  std::vector<Node> elems = flatten(std::move(groups));
  if (!sep && elems.size() == 1) {
    if ((open == Tok::LParen) != (close == Tok::RParen)) throw ParseError{};
    return std::move(elems[0]);
  }
  if (elems.size() == 2) {
    Node iv = Node::make(T::Interval, std::move(elems));
    iv.left_open = open == Tok::LParen;
    iv.right_open = close == Tok::RParen;
    iv.bracket_pair = true;
    return iv;
  }
  return Node::make(T::Tuple, std::move(elems));
}

Node Parser::parse_function(const std::string& name) {
  bool has_pow = false, has_base = false;
  Node power, base;
  for (int k = 0; k < 2; ++k) {
    if (!has_pow && accept(Tok::Caret)) {
      power = parse_script();
      has_pow = true;
    } else if (!has_base && accept(Tok::Underscore)) {
      base = parse_script();
      has_base = true;
    }
  }
  Node arg;
  if (accept(Tok::LParen)) {
    arg = parse_additive();
    expect(Tok::RParen);
  } else if (at(Tok::LBrace)) {
    arg = parse_braced();
  } else {
    arg = parse_implicit(true);
  }
  Node f;
  if (name == "log" || name == "ln" || name == "lg") {
    if (has_base) f = func("log", {std::move(arg), std::move(base)});
    else f = func(name == "ln" ? "ln" : "log10", {std::move(arg)});
  } else {
    std::string fname = name;
    const bool inverse = has_pow && power.type == T::Neg && power.kids[0].type == T::Number &&
                         power.kids[0].text == "1" &&
                         (name == "sin" || name == "cos" || name == "tan");
    if (inverse) {
      fname = "arc" + name;
      has_pow = false;
    }
    f = func(fname, {std::move(arg)});
  }
  if (has_pow) f = Node::make(T::Pow, {std::move(f), std::move(power)});
  return f;
}

Node Parser::parse_matrix(const std::string& env) {
  static const char* const kEnvs[] = {"pmatrix", "bmatrix", "Bmatrix", "vmatrix", "Vmatrix",
                                      "matrix", "smallmatrix", "array"};
  if (std::none_of(std::begin(kEnvs), std::end(kEnvs), [&](const char* e) { return env == e; })) {
    throw ParseError{};
  }
  const std::string end = "end:" + env;
  std::vector<std::vector<Node>> rows(1);
  while (true) {
    if (at_cmd(end)) {
      ++i_;
      break;
    }
    rows.back().push_back(parse_additive());
    if (accept(Tok::Amp)) continue;
    if (accept(Tok::RowSep)) {
      if (!at_cmd(end)) rows.emplace_back();
      continue;
    }
    if (!at_cmd(end)) throw ParseError{};
  }
  const size_t cols = rows[0].size();
  Node m;
  m.type = T::Matrix;
  for (auto& r : rows) {
    if (r.size() != cols) throw ParseError{};
    for (auto& c : r) m.kids.push_back(std::move(c));
  }
  m.rows = static_cast<int>(rows.size());
  m.cols = static_cast<int>(cols);
  if (env == "vmatrix") return func("det", {std::move(m)});
  return m;
}

Node Parser::parse_command() {
  const std::string name = peek().text;
  ++i_;
  if (name == "frac") {
    Node a = parse_arg();
    Node b = parse_arg();
    const bool ints = node_is_int_literal(a) && node_is_int_literal(b);
    Node d = Node::make(T::Div, {std::move(a), std::move(b)});
    d.int_frac = ints;
    return d;
  }
  if (name == "sqrt") {
    if (accept(Tok::LBrack)) {
      Node idx = parse_additive();
      expect(Tok::RBrack);
      Node a = parse_arg();
      return func("root", {std::move(a), std::move(idx)});
    }
    return func("sqrt", {parse_arg()});
  }
  if (name == "binom" || name == "dbinom" || name == "tbinom") {
    Node a = parse_arg();
    Node b = parse_arg();
    return func("binomial", {std::move(a), std::move(b)});
  }
  if (name == "boxed" || name == "fbox") {
    expect(Tok::LBrace);
    bool sep = false;
    auto groups = parse_list(&sep);
    expect(Tok::RBrace);
    return set_or_single(std::move(groups), sep);
  }
  if (name == "lfloor" || name == "lceil") {
    Node e = parse_additive();
    if (!at_cmd(name == "lfloor" ? "rfloor" : "rceil")) throw ParseError{};
    ++i_;
    return func(name == "lfloor" ? "floor" : "ceil", {std::move(e)});
  }
  if (name.compare(0, 6, "begin:") == 0) return parse_matrix(name.substr(6));
  if (name == "max" || name == "min" || name == "gcd" || name == "lcm") {
    expect(Tok::LParen);
    bool sep = false;
    auto groups = parse_list(&sep);
    expect(Tok::RParen);
    return func(name, flatten(std::move(groups)));
  }
  if (is_function_cmd(name)) return parse_function(name);
  // \operatorname{name}: a call when an argument list follows, else a symbol.
  if (at(Tok::LParen)) return parse_function(name);
  return Node::leaf(T::Symbol, name);
}

Node Parser::parse_primary() {
  Guard g(*this);
  const Token& tk = peek();
  switch (tk.kind) {
    case Tok::Number: {
      Node n = number_node(tk.text);
      ++i_;
      return n;
    }
    case Tok::Letter: {
      std::string name = tk.text;
      ++i_;
      if (name == "e" || name == "E") return Node::leaf(T::Const, "e");
      if (name == "I") return Node::leaf(T::Const, "i");
      for (char& c : name) c = scan::lower(c);
      return Node::leaf(T::Symbol, name);
    }
    case Tok::Const: {
      Node n = Node::leaf(T::Const, tk.text);
      ++i_;
      return n;
    }
    case Tok::Name: {
      if (tk.text.empty()) throw ParseError{};
      if (tk.text == "math{r}") {
        // \mathbb{R}: the whole real line.
        ++i_;
        Node all = Node::make(T::Interval, {neg(Node::leaf(T::Const, "oo")), Node::leaf(T::Const, "oo")});
        all.left_open = all.right_open = true;
        return all;
      }
      Node n = Node::leaf(T::Symbol, tk.text);
      ++i_;
      return n;
    }
    case Tok::LParen: case Tok::LBrack:
      return parse_group();
    case Tok::LBrace: {
      ++i_;
      bool sep = false;
      auto groups = parse_list(&sep);
      expect(Tok::RBrace);
      return set_or_single(std::move(groups), sep);
    }
    case Tok::LSet: {
      ++i_;
      if (accept(Tok::RSet)) return Node::make(T::EmptySet, {});
      bool sep = false;
      auto groups = parse_list(&sep);
      expect(Tok::RSet);
      return Node::make(T::Set, flatten(std::move(groups)));
    }
    case Tok::Empty:
      ++i_;
      return Node::make(T::EmptySet, {});
    case Tok::Pipe: {
      ++i_;
      ++abs_depth_;
      Node e = parse_additive();
      --abs_depth_;
      expect(Tok::Pipe);
      return func("abs", {std::move(e)});
    }
    case Tok::Cmd:
      return parse_command();
    default:
      throw ParseError{};
  }
}

}  // namespace grpo::math::latex_detail
