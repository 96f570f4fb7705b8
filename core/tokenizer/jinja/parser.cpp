#include "tokenizer/jinja/parser.h"

#include <algorithm>
#include <set>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/lexer.h"

namespace grpo::tok::jinja {

namespace {

using K = Expr::Kind;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse() {
    Body body = subparse({});
    if (cur().type != TokenType::End) fail("unexpected " + describe(cur()));
    return body;
  }

 private:
  // --- Token stream -------------------------------------------------------------
  const Token& cur() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool is_op(const char* op) const { return cur().type == TokenType::Operator && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == TokenType::Name && cur().text == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  [[noreturn]] void fail(const std::string& message) const { throw JinjaError(message, cur().line); }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
  }
  const Token& expect(TokenType type, const char* what) {
    if (cur().type != type) fail(std::string("expected ") + what + ", got " + describe(cur()));
    return next();
  }
  std::string expect_name() { return expect(TokenType::Name, "a name").text; }

  // --- Statements ---------------------------------------------------------------

  // Text, {{ }} and statements up to a {% tag %} named in `end_tags`; the
  // stream is left on that tag's name.
  Body subparse(const std::vector<std::string>& end_tags) {
    Body body;
    while (cur().type != TokenType::End) {
      const Token& t = cur();
      if (t.type == TokenType::Data) {
        auto s = std::make_unique<Stmt>(Stmt::Kind::Text, t.line);
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == TokenType::VariableBegin) {
        next();
        auto s = std::make_unique<Stmt>(Stmt::Kind::Output, cur().line);
        s->expr = parse_tuple(false, true, {}, false);
        expect(TokenType::VariableEnd, "end of print statement");
        body.push_back(std::move(s));
      } else if (t.type == TokenType::BlockBegin) {
        next();
        if (cur().type == TokenType::Name &&
            std::find(end_tags.begin(), end_tags.end(), cur().text) != end_tags.end())
          return body;
        body.push_back(parse_statement());
        expect(TokenType::BlockEnd, "end of statement block");
      } else {
        fail("unexpected " + describe(t));
      }
    }
    return body;
  }

  // The body of a block tag: the header's %} has not been read yet.
  Body parse_statements(const std::vector<std::string>& end_tags, bool drop_needle, const std::string& opener,
                        int opener_line) {
    skip_op(":");
    expect(TokenType::BlockEnd, "end of statement block");
    Body body = subparse(end_tags);
    if (cur().type == TokenType::End) {
      std::string names;
      for (const auto& t : end_tags) names += (names.empty() ? "'" : " or '") + t + "'";
      fail("unexpected end of template: the '" + opener + "' tag of line " + std::to_string(opener_line) +
           " was never closed (expected " + names + ")");
    }
    if (drop_needle) next();
    return body;
  }

  StmtPtr parse_statement() {
    const Token& t = cur();
    if (t.type != TokenType::Name) fail("tag name expected");
    const std::string tag = t.text;
    if (tag == "if") return parse_if();
    if (tag == "for") return parse_for();
    if (tag == "set") return parse_set();
    if (tag == "macro") return parse_macro();
    if (tag == "call") return parse_call_block();
    if (tag == "filter") return parse_filter_block();
    if (tag == "with") return parse_with();
    if (tag == "print") return parse_print();
    if (tag == "generation") {
      int line = next().line;
      auto s = std::make_unique<Stmt>(Stmt::Kind::Generation, line);
      s->body = parse_statements({"endgeneration"}, true, tag, line);
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail("'" + tag + "' outside of a loop");
      int line = next().line;
      return std::make_unique<Stmt>(tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, line);
    }
    static const std::set<std::string> unsupported = {"extends", "block", "include", "import", "from",
                                                      "autoescape", "do", "trans", "pluralize", "debug"};
    if (unsupported.count(tag)) fail("the tag '" + tag + "' is not supported");
    static const std::set<std::string> closers = {"endif", "endfor", "endset", "endmacro", "endcall", "endfilter",
                                                  "endwith", "elif", "else", "endgeneration", "endraw"};
    if (closers.count(tag)) fail("unexpected '" + tag + "' (no open tag it closes)");
    fail("unknown tag '" + tag + "'");
  }

  StmtPtr parse_if() {
    int line = next().line;
    auto s = std::make_unique<Stmt>(Stmt::Kind::If, line);
    while (true) {
      ExprPtr cond = parse_tuple(false, false, {}, false);
      Body body = parse_statements({"elif", "else", "endif"}, false, "if", line);
      s->branches.emplace_back(std::move(cond), std::move(body));
      std::string closer = next().text;
      if (closer == "elif") continue;
      if (closer == "else") s->else_body = parse_statements({"endif"}, true, "if", line);
      break;
    }
    return s;
  }

  StmtPtr parse_for() {
    int line = next().line;
    auto s = std::make_unique<Stmt>(Stmt::Kind::For, line);
    s->target = parse_assign_target({"in"}, false);
    if (!skip_name("in")) fail("expected 'in' in the for tag, got " + describe(cur()));
    s->expr = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) s->cond = parse_expression(true);
    if (is_name("recursive")) fail("recursive for loops are not supported");
    ++loop_depth_;
    s->body = parse_statements({"endfor", "else"}, false, "for", line);
    --loop_depth_;
    if (next().text == "else") s->else_body = parse_statements({"endfor"}, true, "for", line);
    return s;
  }

  StmtPtr parse_set() {
    int line = next().line;
    Target target = parse_assign_target({}, true);
    if (skip_op("=")) {
      auto s = std::make_unique<Stmt>(Stmt::Kind::Set, line);
      s->target = std::move(target);
      s->expr = parse_tuple(false, true, {}, false);
      return s;
    }
    auto s = std::make_unique<Stmt>(Stmt::Kind::SetBlock, line);
    if (!target.attribute.empty() || target.unpack) fail("a {% set %} block assigns to a single name");
    s->target = std::move(target);
    while (is_op("|")) {
      next();
      s->filters.push_back(parse_filter_call(nullptr));
    }
    s->body = parse_statements({"endset"}, true, "set", line);
    return s;
  }

  std::vector<MacroParam> parse_signature() {
    std::vector<MacroParam> params;
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      MacroParam p;
      p.name = expect_name();
      if (skip_op("=")) p.default_value = parse_expression(true);
      else if (!params.empty() && params.back().default_value) fail("non-default argument follows default argument");
      params.push_back(std::move(p));
    }
    expect_op(")");
    return params;
  }

  StmtPtr parse_macro() {
    int line = next().line;
    auto s = std::make_unique<Stmt>(Stmt::Kind::Macro, line);
    s->text = expect_name();
    s->params = parse_signature();
    int saved = loop_depth_;
    loop_depth_ = 0;  // a loop around the macro does not make break valid inside it
    s->body = parse_statements({"endmacro"}, true, "macro", line);
    loop_depth_ = saved;
    return s;
  }

  StmtPtr parse_call_block() {
    int line = next().line;
    auto s = std::make_unique<Stmt>(Stmt::Kind::CallBlock, line);
    if (is_op("(")) s->params = parse_signature();
    s->expr = parse_expression(true);
    if (s->expr->kind != K::Call) fail("the call tag expects a call expression");
    int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_statements({"endcall"}, true, "call", line);
    loop_depth_ = saved;
    return s;
  }

  StmtPtr parse_filter_block() {
    int line = next().line;
    auto s = std::make_unique<Stmt>(Stmt::Kind::FilterBlock, line);
    s->filters.push_back(parse_filter_call(nullptr));
    while (is_op("|")) {
      next();
      s->filters.push_back(parse_filter_call(nullptr));
    }
    s->body = parse_statements({"endfilter"}, true, "filter", line);
    return s;
  }

  StmtPtr parse_with() {
    int line = next().line;
    auto s = std::make_unique<Stmt>(Stmt::Kind::With, line);
    while (cur().type != TokenType::BlockEnd) {
      if (!s->assignments.empty()) expect_op(",");
      Target t = parse_assign_target({}, false);
      expect_op("=");
      s->assignments.emplace_back(std::move(t), parse_expression(true));
    }
    s->body = parse_statements({"endwith"}, true, "with", line);
    return s;
  }

  StmtPtr parse_print() {
    int line = next().line;
    auto s = std::make_unique<Stmt>(Stmt::Kind::Output, line);
    s->expr = parse_tuple(false, true, {}, false);
    return s;
  }

  // A name, `a, b` / `(a, b)`, or (for set) `ns.attr`.
  Target parse_assign_target(const std::vector<std::string>& extra_end, bool with_namespace) {
    Target t;
    if (with_namespace && cur().type == TokenType::Name && look().type == TokenType::Operator && look().text == ".") {
      t.names.push_back(next().text);
      next();
      t.attribute = expect_name();
      return t;
    }
    bool parenthesized = skip_op("(");
    while (true) {
      if (!t.names.empty()) {
        if (!skip_op(",")) break;
        t.unpack = true;
      }
      if ((parenthesized && is_op(")")) || tuple_end(extra_end)) break;
      if (is_op("(")) fail("nested tuple unpacking is not supported");
      t.names.push_back(expect_name());
    }
    if (parenthesized) {
      expect_op(")");
      t.unpack = true;
    }
    if (t.names.empty()) fail("expected a name to assign to, got " + describe(cur()));
    static const std::set<std::string> reserved = {"true", "false", "none", "True", "False", "None"};
    for (const auto& n : t.names) {
      if (reserved.count(n)) fail("cannot assign to '" + n + "'");
      if (n == "loop" && (loop_depth_ > 0 || !extra_end.empty()))
        fail("can't assign to special loop variable in for-loop target");
    }
    return t;
  }

  // --- Expressions --------------------------------------------------------------

  bool tuple_end(const std::vector<std::string>& extra_end) const {
    if (cur().type == TokenType::VariableEnd || cur().type == TokenType::BlockEnd || is_op(")")) return true;
    return cur().type == TokenType::Name && std::find(extra_end.begin(), extra_end.end(), cur().text) != extra_end.end();
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr, const std::vector<std::string>& extra_end,
                      bool explicit_parentheses) {
    int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (tuple_end(extra_end)) break;
      items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses) fail("expected an expression, got " + describe(cur()));
    }
    auto e = std::make_unique<Expr>(K::Tuple, line);
    e->items = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      int line = next().line;
      auto e = std::make_unique<Expr>(K::Conditional, line);
      e->a = parse_or();
      if (skip_name("else")) e->c = parse_condexpr();
      e->b = std::move(expr);
      expr = std::move(e);
    }
    return expr;
  }

  ExprPtr binary(const std::string& op, ExprPtr left, ExprPtr right, int line) {
    auto e = std::make_unique<Expr>(K::Binary, line);
    e->name = op;
    e->a = std::move(left);
    e->b = std::move(right);
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      int line = next().line;
      left = binary("or", std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      int line = next().line;
      left = binary("and", std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      int line = next().line;
      auto e = std::make_unique<Expr>(K::Unary, line);
      e->name = "not";
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr first = parse_math1();
    std::unique_ptr<Expr> cmp;
    while (true) {
      std::string op;
      if (cur().type == TokenType::Operator &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" || cur().text == ">" ||
           cur().text == ">=")) {
        op = next().text;
      } else if (skip_name("in")) {
        op = "in";
      } else if (is_name("not") && look().type == TokenType::Name && look().text == "in") {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = std::make_unique<Expr>(K::Compare, line);
        cmp->a = std::move(first);
      }
      cmp->ops.push_back(op);
      cmp->items.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      left = binary(t.text, std::move(left), parse_concat(), t.line);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      int line = next().line;
      left = binary("~", std::move(left), parse_math2(), line);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      left = binary(t.text, std::move(left), parse_pow(), t.line);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      int line = next().line;
      left = binary("**", std::move(left), parse_unary(true), line);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      node = std::make_unique<Expr>(K::Unary, t.line);
      node->name = t.text;
      node->a = parse_unary(false);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    int line = t.line;
    if (t.type == TokenType::Name) {
      next();
      if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
        auto e = std::make_unique<Expr>(K::Constant, line);
        e->value = Value(t.text == "true" || t.text == "True");
        return e;
      }
      if (t.text == "none" || t.text == "None") {
        auto e = std::make_unique<Expr>(K::Constant, line);
        e->value = Value::none();
        return e;
      }
      auto e = std::make_unique<Expr>(K::Name, line);
      e->name = t.text;
      return e;
    }
    if (t.type == TokenType::String) {
      std::string s;
      while (cur().type == TokenType::String) s += next().text;  // adjacent literals concatenate
      auto e = std::make_unique<Expr>(K::Constant, line);
      e->value = Value(std::move(s));
      return e;
    }
    if (t.type == TokenType::Integer || t.type == TokenType::Float) {
      next();
      auto e = std::make_unique<Expr>(K::Constant, line);
      e->value = t.type == TokenType::Integer ? Value(t.integer) : Value(t.number);
      return e;
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(false, true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      auto e = std::make_unique<Expr>(K::List, line);
      while (!is_op("]")) {
        if (!e->items.empty()) expect_op(",");
        if (is_op("]")) break;
        e->items.push_back(parse_expression(true));
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      next();
      auto e = std::make_unique<Expr>(K::Dict, line);
      while (!is_op("}")) {
        if (!e->items.empty()) expect_op(",");
        if (is_op("}")) break;
        e->items.push_back(parse_expression(true));
        expect_op(":");
        e->items.push_back(parse_expression(true));
      }
      expect_op("}");
      return e;
    }
    fail("unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
      else if (is_op("(")) node = parse_call(std::move(node));
      else return node;
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        next();
        node = parse_filter_call(std::move(node));
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = next();
    if (t.text == ".") {
      const Token& attr = next();
      if (attr.type == TokenType::Name) {
        auto e = std::make_unique<Expr>(K::GetAttr, t.line);
        e->a = std::move(node);
        e->name = attr.text;
        return e;
      }
      if (attr.type != TokenType::Integer) throw JinjaError("expected a name or number after '.'", attr.line);
      auto key = std::make_unique<Expr>(K::Constant, attr.line);
      key->value = Value(attr.integer);
      auto e = std::make_unique<Expr>(K::GetItem, t.line);
      e->a = std::move(node);
      e->b = std::move(key);
      return e;
    }
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    if (args.size() == 1 && args[0]->kind == K::Slice) {
      args[0]->a = std::move(node);
      return std::move(args[0]);
    }
    auto e = std::make_unique<Expr>(K::GetItem, t.line);
    e->a = std::move(node);
    if (args.size() == 1) {
      e->b = std::move(args[0]);
    } else {
      auto tuple = std::make_unique<Expr>(K::Tuple, t.line);
      for (auto& arg : args) {
        if (arg->kind == K::Slice) fail("multi-dimensional slicing is not supported");
        tuple->items.push_back(std::move(arg));
      }
      e->b = std::move(tuple);
    }
    return e;
  }

  // One subscript: an expression, or a slice `start:stop:step` (`a` is filled in by the caller).
  ExprPtr parse_subscribed() {
    int line = cur().line;
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_expression(true);
      if (!is_op(":")) return start;
    }
    next();
    auto s = std::make_unique<Expr>(K::Slice, line);
    s->b = std::move(start);
    if (!is_op(":") && !is_op("]") && !is_op(",")) s->c = parse_expression(true);
    if (skip_op(":")) {
      if (!is_op("]") && !is_op(",")) s->items.push_back(parse_expression(true));
    }
    return s;
  }

  ArgList parse_call_args() {
    ArgList args;
    expect_op("(");
    bool need_comma = false;
    while (!is_op(")")) {
      if (need_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (skip_op("*")) {
        if (args.star || args.star_star) fail("invalid syntax for function call expression");
        args.star = parse_expression(true);
      } else if (skip_op("**")) {
        if (args.star_star) fail("invalid syntax for function call expression");
        args.star_star = parse_expression(true);
      } else if (cur().type == TokenType::Name && look().type == TokenType::Operator && look().text == "=") {
        if (args.star_star) fail("invalid syntax for function call expression");
        std::string key = next().text;
        next();
        args.keyword.emplace_back(key, parse_expression(true));
      } else {
        if (args.star || args.star_star || !args.keyword.empty()) fail("positional argument follows keyword argument");
        args.positional.push_back(parse_expression(true));
      }
      need_comma = true;
    }
    expect_op(")");
    return args;
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = std::make_unique<Expr>(K::Call, cur().line);
    e->a = std::move(node);
    e->args = parse_call_args();
    return e;
  }

  // After the `|`: name(.name)* [(args)].
  ExprPtr parse_filter_call(ExprPtr node) {
    int line = cur().line;
    auto e = std::make_unique<Expr>(K::Filter, line);
    e->name = expect_name();
    while (skip_op(".")) e->name += "." + expect_name();
    if (is_op("(")) e->args = parse_call_args();
    e->a = std::move(node);
    return e;
  }

  ExprPtr parse_test(ExprPtr node) {
    int line = next().line;  // `is`
    auto e = std::make_unique<Expr>(K::Test, line);
    e->negated = skip_name("not");
    e->name = expect_name();
    while (skip_op(".")) e->name += "." + expect_name();
    const Token& t = cur();
    bool bare_argument =
        (t.type == TokenType::Name || t.type == TokenType::String || t.type == TokenType::Integer ||
         t.type == TokenType::Float || is_op("[") || is_op("{")) &&
        !(t.type == TokenType::Name && (t.text == "else" || t.text == "or" || t.text == "and"));
    if (is_op("(")) {
      e->args = parse_call_args();
    } else if (bare_argument) {
      if (is_name("is")) fail("you cannot chain multiple tests with is");
      e->args.positional.push_back(parse_postfix(parse_primary()));
    }
    e->a = std::move(node);
    return e;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(const std::string& source) { return Parser(tokenize(source)).parse(); }

}  // namespace grpo::tok::jinja
