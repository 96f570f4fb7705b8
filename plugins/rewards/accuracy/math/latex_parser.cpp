// Grammar rules: lists, relations, set operators, arithmetic.
#include "latex_parser.h"

#include "latex_parse.h"
#include "text_scan.h"

namespace grpo::math::latex_detail {

std::vector<std::vector<Node>> Parser::parse_list(bool* had_sep) {
  Guard g(*this);
  std::vector<std::vector<Node>> groups(1);
  *had_sep = false;
  while (true) {
    parse_element(&groups.back());
    if (accept(Tok::Comma)) {
      *had_sep = true;
    } else if (accept(Tok::Semicolon)) {
      *had_sep = true;
      groups.emplace_back();
    } else {
      return groups;
    }
  }
}

bool Parser::element_has_pm() const {
  int depth = 0;
  for (size_t k = i_; k < t_.size(); ++k) {
    switch (t_[k].kind) {
      case Tok::LParen: case Tok::LBrack: case Tok::LBrace: case Tok::LSet: ++depth; break;
      case Tok::RParen: case Tok::RBrack: case Tok::RBrace: case Tok::RSet:
        if (--depth < 0) return false;
        break;
      case Tok::Comma: case Tok::Semicolon:
        if (depth == 0) return false;
        break;
      case Tok::PlusMinus: case Tok::MinusPlus: return true;
      case Tok::End: return false;
      default: break;
    }
  }
  return false;
}

void Parser::parse_element(std::vector<Node>* out) {
  if (pm_sign_ != 0 || !element_has_pm()) {
    out->push_back(parse_relation());
    return;
  }
  const size_t start = i_;
  pm_sign_ = 1;
  Node plus = parse_relation();
  const size_t end = i_;
  i_ = start;
  pm_sign_ = -1;
  Node minus = parse_relation();
  pm_sign_ = 0;
  if (i_ != end) throw ParseError{};
  out->push_back(std::move(plus));
  out->push_back(std::move(minus));
}

Node Parser::parse_relation() {
  Guard g(*this);
  Node cur = parse_setexpr();
  while (at_relation()) {
    const Token op = peek();
    ++i_;
    Node rhs = parse_setexpr();
    if (op.kind == Tok::Approx) {
      // "x \approx 3.14" reads as the value, "\pi \approx 3.14" as the exact side.
      if (cur.type != T::Relation && node_only_symbols(cur)) cur = std::move(rhs);
      continue;
    }
    const RelOp r = op.kind == Tok::In ? RelOp::Eq : op.rel;
    if (cur.type == T::Relation) {
      cur.ops.push_back(r);
      cur.kids.push_back(std::move(rhs));
    } else {
      Node rel = Node::make(T::Relation, {std::move(cur), std::move(rhs)});
      rel.ops.push_back(r);
      cur = std::move(rel);
    }
  }
  return cur;
}

Node Parser::parse_setexpr() {
  Node left = parse_additive();
  while (at(Tok::Union) || at(Tok::Inter) || at(Tok::SetMinus)) {
    const Tok k = peek().kind;
    ++i_;
    Node right = parse_additive();
    const T type = k == Tok::Union ? T::Union : k == Tok::Inter ? T::Intersection : T::SetMinus;
    for (Node* side : {&left, &right}) {
      if (side->type == T::Tuple) side->type = T::Set;
    }
    if (type == T::Union && left.type == T::Union) {
      left.kids.push_back(std::move(right));
    } else {
      left = Node::make(type, {std::move(left), std::move(right)});
    }
  }
  return left;
}

Node Parser::parse_additive() {
  Guard g(*this);
  Node left = parse_term();
  int s;
  while ((s = sign_here()) != 0) {
    ++i_;
    Node right = parse_term();
    if (s < 0) right = neg(std::move(right));
    if (left.type == T::Add && !left.mixed) {
      left.kids.push_back(std::move(right));
    } else {
      left = Node::make(T::Add, {std::move(left), std::move(right)});
    }
  }
  return left;
}

Node Parser::parse_term() {
  Node left = parse_implicit(false);
  while (at(Tok::Star) || at(Tok::Slash) || at(Tok::Colon)) {
    const Tok k = peek().kind;
    ++i_;
    Node right = parse_implicit(false);
    if (k == Tok::Star) {
      left = Node::make(T::Mul, {std::move(left), std::move(right)});
    } else {
      const bool ints = node_is_int_literal(left) && node_is_int_literal(right);
      left = Node::make(T::Div, {std::move(left), std::move(right)});
      left.int_frac = ints;
    }
  }
  return left;
}

Node Parser::parse_implicit(bool no_func) {
  Guard g(*this);
  const int s = sign_here();
  if (s != 0) {
    ++i_;
    Node inner = parse_implicit(no_func);
    return s < 0 ? neg(std::move(inner)) : inner;
  }
  std::vector<Node> f;
  f.push_back(parse_postfix());
  while (starts_factor(no_func)) f.push_back(parse_postfix());
  if (f.size() == 1) return std::move(f[0]);
  if (f.size() == 2 && is_positive_int(f[0]) && f[1].type == T::Div && f[1].int_frac &&
      is_positive_int(f[1].kids[0]) && is_positive_int(f[1].kids[1])) {
    Node m = Node::make(T::Add, std::move(f));
    m.mixed = true;
    return m;
  }
  return Node::make(T::Mul, std::move(f));
}

Node Parser::parse_postfix() {
  Node p = parse_power();
  while (true) {
    if (accept(Tok::Bang)) {
      p = func("factorial", {std::move(p)});
    } else if (accept(Tok::Percent)) {
      p = Node::make(T::Percent, {std::move(p)});
    } else if (!accept(Tok::Prime) && !accept(Tok::Degree)) {
      return p;
    }
  }
}

Node Parser::parse_power() {
  Node base = parse_primary();
  while (true) {
    if (accept(Tok::Caret)) {
      if (accept(Tok::Degree)) continue;  // degrees are dropped
      if (at(Tok::LBrace) && peek(1).kind == Tok::Degree && peek(2).kind == Tok::RBrace) {
        i_ += 3;
        continue;
      }
      Node e = parse_script();
      base = Node::make(T::Pow, {std::move(base), std::move(e)});
    } else if (accept(Tok::Underscore)) {
      const std::string sub = subscript_text();
      if (base.type == T::Symbol) base.text += sub.size() > 1 ? "_{" + sub + "}" : "_" + sub;
    } else {
      return base;
    }
  }
}

Node Parser::parse_script() {
  Guard g(*this);
  if (at(Tok::LBrace)) return parse_braced();
  if (accept(Tok::Minus)) return neg(parse_script());
  switch (peek().kind) {
    case Tok::Number: case Tok::Letter: case Tok::Const: case Tok::Name: case Tok::Cmd:
    case Tok::LParen:
      return parse_primary();
    default:
      throw ParseError{};
  }
}

}  // namespace grpo::math::latex_detail
