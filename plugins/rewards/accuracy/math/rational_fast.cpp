#include "rational_fast.h"

#include <string>

#include "latex_parse.h"

namespace grpo::math {
namespace {

using T = Node::Type;
using i128 = __int128;

struct Q {
  i128 n = 0;
  i128 d = 1;
};

i128 abs128(i128 v) { return v < 0 ? -v : v; }

i128 gcd128(i128 a, i128 b) {
  a = abs128(a);
  b = abs128(b);
  while (b) {
    const i128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

std::optional<Q> make(i128 n, i128 d) {
  if (d == 0) return std::nullopt;
  if (d < 0) n = -n, d = -d;
  const i128 g = gcd128(n, d);
  if (g > 1) n /= g, d /= g;
  return Q{n, d};
}

std::optional<Q> add(const Q& a, const Q& b) {
  i128 x, y, z;
  if (__builtin_mul_overflow(a.n, b.d, &x) || __builtin_mul_overflow(b.n, a.d, &y) ||
      __builtin_add_overflow(x, y, &x) || __builtin_mul_overflow(a.d, b.d, &z)) {
    return std::nullopt;
  }
  return make(x, z);
}

std::optional<Q> mul(const Q& a, const Q& b) {
  i128 x, z;
  if (__builtin_mul_overflow(a.n, b.n, &x) || __builtin_mul_overflow(a.d, b.d, &z)) return std::nullopt;
  return make(x, z);
}

std::optional<Q> literal(const std::string& text) {
  i128 n = 0, d = 1;
  bool frac = false;
  int digits = 0;
  for (char c : text) {
    if (c == '.') {
      frac = true;
      continue;
    }
    if (++digits > 36) return std::nullopt;
    n = n * 10 + (c - '0');
    if (frac) d *= 10;
  }
  return make(n, d);
}

std::optional<Q> eval(const Node& node, int depth) {
  if (depth > 64) return std::nullopt;
  switch (node.type) {
    case T::Number: return literal(node.text);
    case T::Neg: {
      auto a = eval(node.kids[0], depth + 1);
      if (!a) return std::nullopt;
      return Q{-a->n, a->d};
    }
    case T::Add: case T::Mul: {
      std::optional<Q> acc = Q{node.type == T::Add ? 0 : 1, 1};
      for (const Node& k : node.kids) {
        auto v = eval(k, depth + 1);
        if (!v) return std::nullopt;
        acc = node.type == T::Add ? add(*acc, *v) : mul(*acc, *v);
        if (!acc) return std::nullopt;
      }
      return acc;
    }
    case T::Div: {
      auto a = eval(node.kids[0], depth + 1);
      auto b = eval(node.kids[1], depth + 1);
      if (!a || !b || b->n == 0) return std::nullopt;
      return mul(*a, Q{b->d, b->n});
    }
    case T::Percent: {
      auto a = eval(node.kids[0], depth + 1);
      if (!a) return std::nullopt;
      return mul(*a, Q{1, 100});
    }
    case T::Pow: {
      auto b = eval(node.kids[0], depth + 1);
      auto e = eval(node.kids[1], depth + 1);
      if (!b || !e || e->d != 1 || abs128(e->n) > 64) return std::nullopt;
      Q r{1, 1};
      for (i128 k = 0; k < abs128(e->n); ++k) {
        auto m = mul(r, *b);
        if (!m) return std::nullopt;
        r = *m;
      }
      if (e->n < 0) {
        if (r.n == 0) return std::nullopt;
        return make(r.d, r.n);
      }
      return r;
    }
    default:
      return std::nullopt;
  }
}

// round(q * 10^6), ties to even (cln's round1, used on the general path).
std::optional<i128> round6(const Q& q) {
  i128 x;
  if (__builtin_mul_overflow(q.n, static_cast<i128>(1000000), &x)) return std::nullopt;
  const bool negative = x < 0;
  const i128 a = abs128(x);
  i128 r = a / q.d;
  const i128 rem = a % q.d;
  if (2 * rem > q.d || (2 * rem == q.d && (r & 1))) ++r;
  return negative ? -r : r;
}

// The number before the percent sign for a percentage of a whole number, the
// value itself for any other whole number; nullopt otherwise (see
// node_is_percent_of_whole: Math-Verify 0.9.0 compares these so).
std::optional<i128> whole_number(const Node& node, const Q& value) {
  if (!node_is_atomic(node) || node_is_float(node)) return std::nullopt;
  if (node_is_percent_of_whole(node)) {
    auto a = eval(node.kids[0], 1);
    if (!a || a->d != 1) return std::nullopt;
    return a->n;
  }
  if (node_has_percent(node) || value.d != 1) return std::nullopt;
  return value.n;
}

}  // namespace

std::optional<bool> fast_numeric_compare(const Node& gold, const Node& pred) {
  auto g = eval(gold, 0);
  if (!g) return std::nullopt;
  auto p = eval(pred, 0);
  if (!p) return std::nullopt;
  if (g->n == p->n && g->d == p->d) return true;
  if (!node_is_atomic(gold) && !node_is_atomic(pred)) return std::nullopt;
  if (!node_is_float(gold) && !node_is_float(pred)) {
    // "9% == 9" in 0.9.0's sympy_numeric_eq, as on the general path.
    const auto a = whole_number(gold, *g), b = whole_number(pred, *p);
    return a && b && *a == *b;
  }
  auto a = round6(*g);
  auto b = round6(*p);
  if (!a || !b) return std::nullopt;
  return *a == *b;
}

}  // namespace grpo::math
