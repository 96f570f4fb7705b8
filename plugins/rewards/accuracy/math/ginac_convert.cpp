#include "ginac_convert.h"

#include <algorithm>
#include <cln/integer.h>
#include <cln/rational.h>
#include <cln/real.h>
#include <cmath>

#include "latex_parse.h"

namespace grpo::math {
namespace {

using T = Node::Type;
using GiNaC::ex;
using GiNaC::ex_to;
using GiNaC::is_a;
using GiNaC::numeric;

constexpr size_t kMaxDigits = 2000;
constexpr long kMaxExponent = 10000;
constexpr double kMaxResultDigits = 20000;

ex number(const std::string& text) {
  const size_t dot = text.find('.');
  std::string digits = dot == std::string::npos ? text : text.substr(0, dot) + text.substr(dot + 1);
  const size_t scale = dot == std::string::npos ? 0 : text.size() - dot - 1;
  if (digits.size() > kMaxDigits) throw Unsupported{};
  const size_t z = digits.find_first_not_of('0');
  digits = z == std::string::npos ? "0" : digits.substr(z);
  numeric n(digits.c_str());
  if (scale) n = n / numeric(10).power(static_cast<long>(scale));
  return n;
}

// Decimal digits of |n| (a rough size measure for exact powers).
double digits_of(const numeric& n) {
  if (n.is_zero() || !n.is_rational()) return 1;
  const numeric a = GiNaC::abs(n);
  if (a.is_integer()) return static_cast<double>(cln::integer_length(cln::the<cln::cl_I>(a.to_cl_N()))) * 0.30103 + 1;
  return digits_of(a.numer()) + digits_of(a.denom());
}

// Exact powers whose result would be enormous (GiNaC computes them eagerly).
// GiNaC throws a pole error from inside pow(0, e <= 0), a division by zero or
// log(0), and then leaks the objects it was building: those are refused
// before GiNaC sees them. 0^e with a symbolic e is refused too, since
// expanding or substituting into it reaches the same throw.
// Whether a number in `e` is larger than `limit` in magnitude (walked without recursion).
bool holds_number_over(const ex& e, long limit) {
  std::vector<ex> pending{e};
  while (!pending.empty()) {
    const ex x = pending.back();
    pending.pop_back();
    if (is_a<numeric>(x) && GiNaC::abs(ex_to<numeric>(x)) > numeric(limit)) return true;
    for (size_t i = 0; i < x.nops(); ++i) pending.push_back(x.op(i));
  }
  return false;
}

ex checked_pow(const ex& base, const ex& e) {
  if (base.is_zero() && !(is_a<numeric>(e) && ex_to<numeric>(e).is_real() && ex_to<numeric>(e).is_positive()))
    throw Unsupported{};
  // 2^(10^25 - x): expanding splits the sum and computes 2^(10^25) eagerly.
  const bool trivial = base.is_equal(1) || base.is_equal(-1);
  if (!is_a<numeric>(e) && !trivial && holds_number_over(e, kMaxExponent)) throw Unsupported{};
  if (is_a<numeric>(e) && ex_to<numeric>(e).is_real()) {
    const numeric k = ex_to<numeric>(e);
    const bool trivial_base = base.is_zero() || base.is_equal(1) || base.is_equal(-1);
    if (GiNaC::abs(k) > numeric(kMaxExponent) && (k.is_integer() || is_a<numeric>(base)) && !trivial_base) {
      throw Unsupported{};
    }
    if (is_a<numeric>(base) && !trivial_base) {
      const double est = digits_of(ex_to<numeric>(base)) * std::fabs(k.to_double());
      if (est > kMaxResultDigits) throw Unsupported{};
    }
  }
  return GiNaC::pow(base, e);
}

ex checked_div(const ex& numerator, const ex& denominator) {
  if (denominator.is_zero()) throw Unsupported{};
  return numerator / denominator;
}

ex checked_log(const ex& x) {
  if (x.is_zero()) throw Unsupported{};
  return GiNaC::log(x);
}

// Factorial / binomial argument: a symbol, or an integer of moderate size.
ex checked_int_arg(const ex& e, long limit) {
  if (is_a<numeric>(e)) {
    const numeric n = ex_to<numeric>(e);
    if (!n.is_integer() || GiNaC::abs(n) > numeric(limit)) throw Unsupported{};
  }
  return e;
}

// floor / ceil of a real number.
ex round_real(const Converter& c, const ex& e, bool up) {
  auto r = c.real_of(e);
  if (!r || r->inf) throw Unsupported{};
  return numeric(up ? cln::ceiling1(r->v) : cln::floor1(r->v));
}

}  // namespace

int compare_real(const RealValue& a, const RealValue& b) {
  if (a.inf != b.inf) return a.inf < b.inf ? -1 : 1;
  if (a.inf) return 0;
  return cln::compare(a.v, b.v);
}

std::optional<RealValue> Converter::real_of(const ex& e) const {
  RealValue r;
  if (e.is_equal(oo_)) {
    r.inf = 1;
    return r;
  }
  if (e.is_equal(-oo_)) {
    r.inf = -1;
    return r;
  }
  ex f = is_a<numeric>(e) ? e : e.evalf();
  if (!is_a<numeric>(f)) return std::nullopt;
  const numeric n = ex_to<numeric>(f);
  if (!n.is_real()) return std::nullopt;
  r.v = cln::the<cln::cl_R>(n.to_cl_N());
  return r;
}

std::vector<GiNaC::symbol> Converter::symbols_of(const ex& e, bool* has_inf) const {
  std::vector<GiNaC::symbol> out;
  *has_inf = false;
  for (auto it = e.preorder_begin(); it != e.preorder_end(); ++it) {
    if (!is_a<GiNaC::symbol>(*it)) continue;
    if (it->is_equal(oo_)) {
      *has_inf = true;
      continue;
    }
    const auto& s = ex_to<GiNaC::symbol>(*it);
    if (std::none_of(out.begin(), out.end(), [&](const GiNaC::symbol& o) { return o.is_equal(s); })) {
      out.push_back(s);
    }
  }
  return out;
}

ex Converter::symbol(const std::string& name) {
  auto it = syms_.find(name);
  if (it == syms_.end()) it = syms_.emplace(name, GiNaC::symbol(name)).first;
  return it->second;
}

ex Converter::function(const Node& n) {
  const std::string& f = n.text;
  if (f == "det") {
    const Value m = value(n.kids.at(0));
    if (m.kind != Value::Kind::Matrix || m.rows != m.cols) throw Unsupported{};
    GiNaC::matrix g(m.rows, m.cols);
    for (int r = 0; r < m.rows; ++r) {
      for (int c = 0; c < m.cols; ++c) g(r, c) = m.items[r * m.cols + c].ex;
    }
    return g.determinant();
  }
  std::vector<ex> a;
  for (const Node& k : n.kids) a.push_back(expr(k));
  if (a.empty()) throw Unsupported{};
  if (f == "max" || f == "min") {
    ex best = a[0];
    auto bv = real_of(best);
    if (!bv) throw Unsupported{};
    for (size_t k = 1; k < a.size(); ++k) {
      auto v = real_of(a[k]);
      if (!v) throw Unsupported{};
      const int c = compare_real(*v, *bv);
      if ((f == "max" && c > 0) || (f == "min" && c < 0)) best = a[k], bv = v;
    }
    return best;
  }
  if (f == "gcd" || f == "lcm") {
    numeric acc;
    for (size_t k = 0; k < a.size(); ++k) {
      if (!is_a<numeric>(a[k]) || !ex_to<numeric>(a[k]).is_integer()) throw Unsupported{};
      const numeric v = ex_to<numeric>(a[k]);
      acc = k == 0 ? v : (f == "gcd" ? GiNaC::gcd(acc, v) : GiNaC::lcm(acc, v));
    }
    return acc;
  }
  const ex& x = a[0];
  if (a.size() == 2) {
    if (f == "log") return checked_div(checked_log(x), checked_log(a[1]));
    if (f == "root") return checked_pow(x, checked_div(1, a[1]));
    if (f == "binomial") return GiNaC::binomial(checked_int_arg(x, 5000), checked_int_arg(a[1], 5000));
    throw Unsupported{};
  }
  if (f == "sin") return GiNaC::sin(x);
  if (f == "cos") return GiNaC::cos(x);
  if (f == "tan") return GiNaC::tan(x);
  if (f == "cot") return checked_div(1, GiNaC::tan(x));
  if (f == "sec") return checked_div(1, GiNaC::cos(x));
  if (f == "csc") return checked_div(1, GiNaC::sin(x));
  if (f == "arcsin") return GiNaC::asin(x);
  if (f == "arccos") return GiNaC::acos(x);
  if (f == "arctan") return GiNaC::atan(x);
  if (f == "sinh") return GiNaC::sinh(x);
  if (f == "cosh") return GiNaC::cosh(x);
  if (f == "tanh") return GiNaC::tanh(x);
  if (f == "exp") return GiNaC::exp(x);
  if (f == "ln") return checked_log(x);
  if (f == "log10") return checked_log(x) / GiNaC::log(ex(10));
  if (f == "sqrt") return GiNaC::sqrt(x);
  if (f == "abs") return GiNaC::abs(x);
  if (f == "factorial") {
    if (is_a<numeric>(x) && ex_to<numeric>(x).is_negative()) throw Unsupported{};
    return GiNaC::factorial(checked_int_arg(x, 2000));
  }
  if (f == "floor") return round_real(*this, x, false);
  if (f == "ceil") return round_real(*this, x, true);
  throw Unsupported{};
}

ex Converter::expr(const Node& n) {
  switch (n.type) {
    case T::Number: return number(n.text);
    case T::Symbol: return symbol(n.text);
    case T::Const:
      if (n.text == "pi") return GiNaC::Pi;
      if (n.text == "e") return GiNaC::exp(ex(1));
      if (n.text == "i") return GiNaC::I;
      return oo_;
    case T::Add: {
      ex s = 0;
      for (const Node& k : n.kids) s += expr(k);
      return s;
    }
    case T::Mul: {
      ex p = 1;
      for (const Node& k : n.kids) p *= expr(k);
      return p;
    }
    case T::Div: {
      const ex den = expr(n.kids[1]);
      if (den.is_zero()) throw Unsupported{};
      return expr(n.kids[0]) / den;
    }
    case T::Neg: return -expr(n.kids[0]);
    case T::Pow: return checked_pow(expr(n.kids[0]), expr(n.kids[1]));
    case T::Percent: return expr(n.kids[0]) / 100;
    case T::Func: return function(n);
    default: throw Unsupported{};
  }
}

namespace {

bool is_percent(const Value& v) { return v.node && v.node->type == Node::Type::Percent; }

// Whether sympy's FiniteSet would hold `a` and `b` once. Numbers by value, but a
// percentage stays apart from the plain number of the same value: sympy keeps
// "58\%" as 58*UnevaluatedExpr(1/100), which neither merges with 29/50 nor
// compares equal to it, so "\boxed{\frac{58}{100}}, \boxed{58\%}" is a set of two.
// Matrices merge when their cells do ("pmatrix" and "bmatrix" of one matrix).
bool same_element(const Value& a, const Value& b) {
  if (a.kind != b.kind) return false;
  if (a.kind == Value::Kind::Expr) return is_percent(a) == is_percent(b) && a.ex.is_equal(b.ex);
  if (a.kind != Value::Kind::Matrix || a.rows != b.rows || a.cols != b.cols) return false;
  for (size_t k = 0; k < a.items.size(); ++k) {
    if (!same_element(a.items[k], b.items[k])) return false;
  }
  return true;
}

}  // namespace

Value Converter::value(const Node& n) {
  Value v;
  v.node = &n;
  switch (n.type) {
    case T::Relation:
      v.kind = Value::Kind::Relation;
      for (const Node& k : n.kids) v.items.push_back(value(k));
      v.ops = n.ops;
      return v;
    case T::Set:
      v.kind = Value::Kind::Set;
      for (const Node& k : n.kids) {
        Value item = value(k);
        // A set holds each element once.
        const bool dup = std::any_of(v.items.begin(), v.items.end(),
                                     [&](const Value& o) { return same_element(o, item); });
        if (!dup) v.items.push_back(std::move(item));
      }
      return v;
    case T::Tuple:
      v.kind = Value::Kind::Tuple;
      for (const Node& k : n.kids) v.items.push_back(value(k));
      return v;
    case T::Interval: {
      v.kind = Value::Kind::Interval;
      v.items.push_back(value(n.kids[0]));
      v.items.push_back(value(n.kids[1]));
      v.left_open = n.left_open;
      v.right_open = n.right_open;
      if (n.bracket_pair && v.items[0].kind == Value::Kind::Expr && v.items[1].kind == Value::Kind::Expr) {
        // "(2, 1)" is not an interval but a pair.
        auto lo = real_of(v.items[0].ex);
        auto hi = real_of(v.items[1].ex);
        if (lo && hi) {
          const int c = compare_real(*hi, *lo);
          if ((n.left_open && n.right_open && c <= 0) || (!n.left_open && !n.right_open && c < 0)) {
            v.kind = Value::Kind::Tuple;
          }
        }
      } else if (n.bracket_pair) {
        v.kind = Value::Kind::Tuple;
      }
      return v;
    }
    case T::Union:
      v.kind = Value::Kind::Union;
      for (const Node& k : n.kids) v.items.push_back(value(k));
      return v;
    case T::Intersection: case T::SetMinus:
      v.kind = Value::Kind::Other;
      return v;
    case T::EmptySet:
      v.kind = Value::Kind::Empty;
      return v;
    case T::Matrix:
      v.kind = Value::Kind::Matrix;
      for (const Node& k : n.kids) {
        v.items.push_back(value(k));
        if (v.items.back().kind != Value::Kind::Expr) throw Unsupported{};
      }
      v.rows = n.rows;
      v.cols = n.cols;
      return v;
    default:
      v.kind = Value::Kind::Expr;
      v.ex = expr(n);
      v.atomic = node_is_atomic(n);
      v.is_float = node_is_float(n);
      return v;
  }
}

}  // namespace grpo::math
