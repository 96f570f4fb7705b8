// The parsed form of a template: expressions and statements, each carrying
// the template line it came from for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace grpo::tok::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// Call arguments as written: f(a, b, key=c, *rest, **more).
struct ArgList {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star;       // *args
  ExprPtr star_star;  // **kwargs
};

struct Expr {
  enum class Kind {
    Constant,   // value
    Name,       // name
    List,       // items
    Tuple,      // items
    Dict,       // items: key, value, key, value...
    GetAttr,    // a.name
    GetItem,    // a[b]
    Slice,      // a[b:c:d], each of b, c, d optional
    Call,       // a(args)
    Filter,     // a | name(args); `a` is null inside {% filter %} blocks
    Test,       // a is [not] name(args)
    Unary,      // op a: "-", "+", "not"
    Binary,     // a op b: + - * / // % ** ~ and or
    Compare,    // a op1 items[0] op2 items[1]...: == != < <= > >= in "not in"
    Conditional,  // b if a else c (c optional)
  };

  Kind kind;
  int line;
  Value value;
  std::string name;  // Name, GetAttr, Filter, Test; the operator of Unary/Binary
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<std::string> ops;  // Compare
  ArgList args;                  // Call, Filter, Test
  bool negated = false;          // Test: `is not`

  Expr(Kind k, int l) : kind(k), line(l) {}
  // Releases the children one at a time, not recursively: a chain of 10,000
  // operators is built by loops, and must be destroyed without recursion too.
  ~Expr();
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// What a `for` or `set` assigns to: a name, a tuple of names, or ns.attr.
struct Target {
  std::vector<std::string> names;
  bool unpack = false;    // `a, b` rather than `a`
  std::string attribute;  // set ns.attr = ...: names = {"ns"}
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: none
};

struct Stmt {
  enum class Kind {
    Text,         // text
    Output,       // {{ expr }}
    If,           // branches (cond, body)...; else_body
    For,          // target in expr [if cond] body; else_body
    Set,          // target = expr
    SetBlock,     // {% set target | filters %}body{% endset %}
    Macro,        // name(params) body
    CallBlock,    // {% call(params) expr %}body{% endcall %}
    FilterBlock,  // {% filter filters %}body{% endfilter %}
    With,         // {% with assignments %}body{% endwith %}
    Break,
    Continue,
    Generation,   // {% generation %}body{% endgeneration %}: rendered as is
  };

  Kind kind;
  int line;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  Target target;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<MacroParam> params;
  std::vector<ExprPtr> filters;  // Filter expressions whose `a` is the block's output
  std::vector<std::pair<Target, ExprPtr>> assignments;  // With

  Stmt(Kind k, int l) : kind(k), line(l) {}
};

// The deepest nesting in `body`: expressions inside expressions and bodies
// inside statements, each counting one level. Walks without recursion.
int nesting_depth(const Body& body);

// What parsing accepts (and so what rendering, which recurses, meets):
// real templates nest a dozen levels.
inline constexpr int kMaxNesting = 256;

}  // namespace grpo::tok::jinja
