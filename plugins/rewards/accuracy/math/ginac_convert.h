// Conversion of parse trees to GiNaC values. Everything here must run under
// the GiNaC lock (see math_equiv.cpp): GiNaC's reference counts are not atomic.
#pragma once

#include <cln/real.h>
#include <ginac/ginac.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "math_ast.h"

namespace grpo::math {

// An answer the backend declines to evaluate (huge powers, division by zero,
// a set used as a number): it compares unequal without an internal error.
struct Unsupported {};

struct Value {
  enum class Kind : uint8_t { Expr, Relation, Set, Tuple, Interval, Union, Matrix, Empty, Other };
  Kind kind = Kind::Expr;
  GiNaC::ex ex;                // Expr
  const Node* node = nullptr;  // source node; null for derived values
  bool atomic = false;         // a plain number literal, or a percentage of one
  bool is_float = false;       // ... written with a decimal point
  std::vector<Value> items;    // relation operands, elements, interval ends, matrix cells
  std::vector<RelOp> ops;      // Relation
  bool left_open = false;
  bool right_open = false;
  int rows = 0;
  int cols = 0;

  static Value of_expr(GiNaC::ex e) {
    Value v;
    v.ex = std::move(e);
    return v;
  }
};

// A real number or +-infinity.
struct RealValue {
  int inf = 0;  // -1, 0 or +1
  cln::cl_R v;
};

class Converter {
 public:
  Value value(const Node& n);
  GiNaC::ex expr(const Node& n);

  const GiNaC::symbol& infinity() const { return oo_; }
  std::optional<RealValue> real_of(const GiNaC::ex& e) const;
  // Free symbols other than the infinity marker; *has_inf reports that marker.
  std::vector<GiNaC::symbol> symbols_of(const GiNaC::ex& e, bool* has_inf) const;

 private:
  GiNaC::ex symbol(const std::string& name);
  GiNaC::ex function(const Node& n);

  std::map<std::string, GiNaC::symbol> syms_;
  GiNaC::symbol oo_{"oo"};
};

// -1 / 0 / +1; both must be comparable.
int compare_real(const RealValue& a, const RealValue& b);

}  // namespace grpo::math
