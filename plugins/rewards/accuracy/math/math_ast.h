// Backend-neutral parse tree of an extracted answer.
//
// Parsing produces these nodes without touching GiNaC, so extraction and
// parsing need no lock; only the comparison step builds GiNaC objects.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace grpo::math {

enum class RelOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge };

struct Node {
  enum class Type : uint8_t {
    Number,        // text: exact decimal literal, "12" or "0.75"
    Symbol,        // text: lower-cased name, "x", "x_1", "monday"
    Const,         // text: "pi", "e", "i" or "oo"
    Add,           // sum of kids
    Mul,           // product of kids
    Div,           // kids[0] / kids[1]
    Neg,           // -kids[0]
    Pow,           // kids[0] ^ kids[1]
    Percent,       // kids[0] / 100
    Func,          // text: function name, kids: arguments
    Relation,      // chain: kids are the n+1 operands, ops the n relations
    Set,           // finite set (unordered)
    Tuple,         // ordered tuple
    Interval,      // kids[0], kids[1] with left_open / right_open
    Union,         // union of kids
    Intersection,  // intersection of kids
    SetMinus,      // kids[0] \ kids[1]
    EmptySet,
    Matrix,        // rows x cols, row-major kids
  };

  Type type = Type::Number;
  std::string text;
  std::vector<Node> kids;
  std::vector<RelOp> ops;
  bool left_open = false;
  bool right_open = false;
  bool bracket_pair = false;  // interval written (a,b) / [a,b]: a tuple when empty
  bool int_frac = false;      // \frac{int}{int}: a rational literal
  bool mixed = false;         // mixed number such as 3\frac{1}{2}
  int rows = 0;
  int cols = 0;

  static Node leaf(Type t, std::string s) {
    Node n;
    n.type = t;
    n.text = std::move(s);
    return n;
  }
  static Node make(Type t, std::vector<Node> k) {
    Node n;
    n.type = t;
    n.kids = std::move(k);
    return n;
  }
};

}  // namespace grpo::math
