// Sets, tuples, intervals, and relations read as solution sets.
#include <functional>

#include "equiv_impl.h"

namespace grpo::math::equiv_detail {

std::optional<Value> Equiv::relation_as_set(const Value& v) {
  for (const Value& it : v.items) {
    if (it.kind != Kind::Expr) return std::nullopt;
  }
  bool has_inf = false;
  std::vector<GiNaC::symbol> syms;
  for (const Value& it : v.items) {
    for (const auto& s : conv_.symbols_of(it.ex, &has_inf)) {
      bool seen = false;
      for (const auto& o : syms) seen = seen || o.is_equal(s);
      if (!seen) syms.push_back(s);
    }
  }
  if (syms.size() != 1) return std::nullopt;
  const GiNaC::symbol x = syms[0];
  std::optional<Value> acc;
  for (size_t k = 0; k < v.ops.size(); ++k) {
    auto s = linear_set(v.items[k].ex, v.ops[k], v.items[k + 1].ex, x);
    if (!s) return std::nullopt;
    if (!acc) {
      acc = std::move(s);
    } else {
      acc = intersect(*acc, *s);
      if (!acc) return std::nullopt;
    }
  }
  return acc;
}

std::optional<Value> Equiv::linear_set(const ex& l, RelOp op, const ex& r, const GiNaC::symbol& x) {
  const ex f = (l - r).expand();
  if (!f.has(x) || !f.is_polynomial(x) || f.degree(x) != 1 || f.ldegree(x) < 0) return std::nullopt;
  const ex c1 = f.coeff(x, 1);
  const ex c0 = f.coeff(x, 0);
  if (c1.has(x) || c0.has(x)) return std::nullopt;
  auto s = conv_.real_of(c1);
  if (!s || s->inf || cln::zerop(s->v)) return std::nullopt;
  const ex at = -c0 / c1;
  if (!conv_.real_of(at)) return std::nullopt;
  const RelOp o = cln::plusp(s->v) ? op : flipped(op);
  const ex& oo = conv_.infinity();
  switch (o) {
    case RelOp::Lt: return interval(-oo, at, true, true);
    case RelOp::Le: return interval(-oo, at, true, false);
    case RelOp::Gt: return interval(at, oo, true, true);
    case RelOp::Ge: return interval(at, oo, false, true);
    case RelOp::Eq: {
      Value set;
      set.kind = Kind::Set;
      set.items.push_back(Value::of_expr(at));
      return set;
    }
    case RelOp::Ne: {
      Value u;
      u.kind = Kind::Union;
      u.items.push_back(interval(-oo, at, true, true));
      u.items.push_back(interval(at, oo, true, true));
      return u;
    }
  }
  return std::nullopt;
}

std::optional<Value> Equiv::intersect(const Value& a, const Value& b) {
  if (a.kind != Kind::Interval || b.kind != Kind::Interval) return std::nullopt;
  auto alo = conv_.real_of(a.items[0].ex), ahi = conv_.real_of(a.items[1].ex);
  auto blo = conv_.real_of(b.items[0].ex), bhi = conv_.real_of(b.items[1].ex);
  if (!alo || !ahi || !blo || !bhi) return std::nullopt;
  const int lo = compare_real(*alo, *blo);
  const int hi = compare_real(*ahi, *bhi);
  const Value& lo_src = lo > 0 ? a : b;
  const Value& hi_src = hi < 0 ? a : b;
  const bool lopen = lo == 0 ? (a.left_open || b.left_open) : lo_src.left_open;
  const bool ropen = hi == 0 ? (a.right_open || b.right_open) : hi_src.right_open;
  return interval(lo_src.items[0].ex, hi_src.items[1].ex, lopen, ropen);
}

bool Equiv::interval_eq(const Value& a, const Value& b) {
  return a.left_open == b.left_open && a.right_open == b.right_open && expr_eq(a.items[0], b.items[0]) &&
         expr_eq(a.items[1], b.items[1]);
}

bool Equiv::compare_sets(const Value& g, const Value& p) {
  const Value a = is_setlike(g) ? g : singleton(g);
  const Value b = is_setlike(p) ? p : singleton(p);
  if (a.kind == Kind::Interval && b.kind == Kind::Interval) return interval_eq(a, b);
  if (same(a, b)) return true;
  const bool a_empty = a.kind == Kind::Empty || (a.kind == Kind::Set && a.items.empty());
  const bool b_empty = b.kind == Kind::Empty || (b.kind == Kind::Set && b.items.empty());
  if (a_empty || b_empty) return a_empty && b_empty;
  if (a.kind == Kind::Union && b.kind == Kind::Union) return union_eq(a, b);
  const bool a_fin = a.kind == Kind::Set || a.kind == Kind::Tuple;
  const bool b_fin = b.kind == Kind::Set || b.kind == Kind::Tuple;
  if (a_fin && b_fin) return deep_compare(a, b);
  // An open interval (a, b) may also have meant the pair (a, b).
  auto as_pair = [](const Value& iv) {
    Value t;
    t.kind = Kind::Tuple;
    t.items = iv.items;
    return t;
  };
  if (a.kind == Kind::Interval && a.left_open && a.right_open && b_fin && b.items.size() == 2) {
    return deep_compare(as_pair(a), b);
  }
  if (b.kind == Kind::Interval && b.left_open && b.right_open && a_fin && a.items.size() == 2) {
    return deep_compare(a, as_pair(b));
  }
  return false;
}

bool Equiv::deep_compare(const Value& a, const Value& b) {
  const size_t n = a.items.size();
  if (n != b.items.size()) return false;
  if (a.kind != Kind::Set) {
    for (size_t k = 0; k < n; ++k) {
      if (!expr_eq(a.items[k], b.items[k])) return false;
    }
    return true;
  }
  if (n > 32) return false;
  // Bipartite matching (augmenting paths) over the equality relation.
  std::vector<std::vector<int>> eq(n, std::vector<int>(n, -1));
  std::vector<int> match_b(n, -1);
  std::vector<char> seen;
  std::function<bool(size_t)> augment = [&](size_t i) {
    for (size_t j = 0; j < n; ++j) {
      if (seen[j]) continue;
      if (eq[i][j] < 0) eq[i][j] = expr_eq(a.items[i], b.items[j]) ? 1 : 0;
      if (!eq[i][j]) continue;
      seen[j] = 1;
      if (match_b[j] < 0 || augment(static_cast<size_t>(match_b[j]))) {
        match_b[j] = static_cast<int>(i);
        return true;
      }
    }
    return false;
  };
  for (size_t i = 0; i < n; ++i) {
    seen.assign(n, 0);
    if (!augment(i)) return false;
  }
  return true;
}

bool Equiv::union_eq(const Value& a, const Value& b) {
  if (a.items.size() != b.items.size()) return false;
  auto sorted = [&](const Value& u) {
    std::vector<const Value*> v;
    for (const Value& it : u.items) v.push_back(&it);
    std::stable_sort(v.begin(), v.end(), [&](const Value* x, const Value* y) {
      if (x->kind != Kind::Interval || y->kind != Kind::Interval) return false;
      auto xl = conv_.real_of(x->items[0].ex), yl = conv_.real_of(y->items[0].ex);
      return xl && yl && compare_real(*xl, *yl) < 0;
    });
    return v;
  };
  const auto sa = sorted(a), sb = sorted(b);
  for (size_t k = 0; k < sa.size(); ++k) {
    if (!compare_sets(*sa[k], *sb[k])) return false;
  }
  return true;
}

}  // namespace grpo::math::equiv_detail
