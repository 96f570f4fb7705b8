// Comparison rules shared by math_equiv.cpp (expressions, relations) and
// set_equiv.cpp (sets, tuples, intervals). Internal; runs under the GiNaC lock.
#pragma once

#include <cln/integer.h>
#include <cln/rational.h>
#include <cln/real.h>
#include <ginac/ginac.h>

#include <optional>
#include <string>
#include <vector>

#include "ginac_convert.h"
#include "latex_parse.h"

namespace grpo::math::equiv_detail {

using GiNaC::ex;
using GiNaC::ex_to;
using GiNaC::is_a;
using GiNaC::numeric;
using Kind = Value::Kind;

inline constexpr size_t kMaxExpandNodes = 3000;

inline bool is_setlike(const Value& v) {
  return v.kind == Kind::Set || v.kind == Kind::Tuple || v.kind == Kind::Interval ||
         v.kind == Kind::Union || v.kind == Kind::Empty;
}
// Sets in sympy's sense (a tuple is not one).
inline bool is_set(const Value& v) { return is_setlike(v) && v.kind != Kind::Tuple; }
inline bool is_equation(const Value& v) {
  if (v.kind != Kind::Relation) return false;
  for (RelOp o : v.ops) {
    if (o != RelOp::Eq) return false;
  }
  return true;
}
inline bool is_assignment(const Value& v) {
  return is_equation(v) && v.items[0].node && node_only_symbols(*v.items[0].node);
}
inline bool is_symbol(const Value& v) { return v.node && v.node->type == Node::Type::Symbol; }

inline RelOp flipped(RelOp o) {
  switch (o) {
    case RelOp::Lt: return RelOp::Gt;
    case RelOp::Gt: return RelOp::Lt;
    case RelOp::Le: return RelOp::Ge;
    case RelOp::Ge: return RelOp::Le;
    default: return o;
  }
}

inline Value relation(Value l, RelOp op, Value r) {
  Value v;
  v.kind = Kind::Relation;
  v.items.push_back(std::move(l));
  v.items.push_back(std::move(r));
  v.ops.push_back(op);
  return v;
}

inline Value interval(ex lo, ex hi, bool lopen, bool ropen) {
  Value v;
  v.kind = Kind::Interval;
  v.items.push_back(Value::of_expr(std::move(lo)));
  v.items.push_back(Value::of_expr(std::move(hi)));
  v.left_open = lopen;
  v.right_open = ropen;
  return v;
}

inline size_t tree_size(const ex& e, size_t limit) {
  size_t n = 0;
  for (auto it = e.preorder_begin(); it != e.preorder_end() && n <= limit; ++it) ++n;
  return n;
}

// No large integer powers of non-numbers, which expand() would blow up.
inline bool safe_to_expand(const ex& e) {
  if (tree_size(e, kMaxExpandNodes) > kMaxExpandNodes) return false;
  for (auto it = e.preorder_begin(); it != e.preorder_end(); ++it) {
    if (!is_a<GiNaC::power>(*it)) continue;
    const ex& k = it->op(1);
    if (!is_a<numeric>(it->op(0)) && is_a<numeric>(k) && GiNaC::abs(ex_to<numeric>(k)) > 40) return false;
  }
  return true;
}

// The comparison rules, gold first.
class Equiv {
 public:
  explicit Equiv(Converter& conv) : conv_(conv) {}

  // Mirrors sympy_expr_eq.
  bool expr_eq(Value g, Value p);

 private:
  Converter& conv_;

  bool same(const Value& a, const Value& b) const;

  Value diff(const Value& a, const Value& b) const { return Value::of_expr(a.ex - b.ex); }

  bool compare_relational(const Value& g, const Value& p);

  // "x < 3" -> (-oo, 3), "1 < x <= 2" -> (1, 2], "x = 4" -> {4}; linear in one symbol only.
  std::optional<Value> relation_as_set(const Value& v);

  std::optional<Value> linear_set(const ex& l, RelOp op, const ex& r, const GiNaC::symbol& x);

  std::optional<Value> intersect(const Value& a, const Value& b);

  static Value singleton(const Value& v) {
    Value s;
    s.kind = Kind::Set;
    s.items.push_back(v);
    return s;
  }

  bool interval_eq(const Value& a, const Value& b);

  bool compare_sets(const Value& g, const Value& p);

  // Element-wise; unordered when the gold side is a set.
  bool deep_compare(const Value& a, const Value& b);

  bool union_eq(const Value& a, const Value& b);

  // "\text{abc}" against a*b*c: the letters joined in order.
  static bool symbol_product(const Value& v, std::string* out);

  bool compare_symbols(const Value& g, const Value& p);

  std::optional<cln::cl_I> round6(const ex& e);

  // percent_as_whole: compare "14\%" with 14 as 0.9.0 does; off inside a
  // matrix, whose cells sympy evaluates (the percent applied) before comparing.
  bool numeric_eq(const Value& g, const Value& p, bool percent_as_whole = true);

  // The whole number a value stands for in that comparison: 14 for "14\%",
  // 14 for "\frac{28}{2}"; nullopt unless it is sympy's Integer or a
  // percentage of one.
  static std::optional<ex> whole_number(const Value& v);

  // |g - p| negligible when both are numbers.
  bool numerically_zero(const ex& g, const ex& p);

  bool symbolic_eq(const Value& g, const Value& p);
};

}  // namespace grpo::math::equiv_detail
