#include "tokenizer/jinja/parser.h"

#include <algorithm>
#include <set>

#include "tokenizer/jinja/expression_parser.h"

namespace grpo::tok::jinja {

namespace {

class Parser : public ExpressionParser {
 public:
  using ExpressionParser::ExpressionParser;

  Body parse() {
    Body body = subparse({});
    if (cur().type != TokenType::End) fail("unexpected " + describe(cur()));
    return body;
  }

 private:
  // --- Statements ---------------------------------------------------------------

  // Text, {{ }} and statements up to a {% tag %} named in `end_tags`; the
  // stream is left on that tag's name.
  Body subparse(const std::vector<std::string>& end_tags) {
    Nest nest(*this);
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

  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(const std::string& source) {
  Body body = Parser(tokenize(source)).parse();
  // Operator chains (1 + 1 + ...) are built by loops: their depth is checked here, before rendering recurses.
  if (nesting_depth(body) > kMaxNesting)
    throw JinjaError("the template nests expressions or blocks more than " + std::to_string(kMaxNesting) +
                     " levels deep");
  return body;
}

}  // namespace grpo::tok::jinja
