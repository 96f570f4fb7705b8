#include "tokenizer/jinja/ast.h"

#include <algorithm>
#include <utility>

namespace grpo::tok::jinja {

namespace {

template <class Visit>
void for_each_child(Expr& e, Visit&& visit) {
  for (ExprPtr* p : {&e.a, &e.b, &e.c, &e.args.star, &e.args.star_star}) visit(*p);
  for (auto& item : e.items) visit(item);
  for (auto& arg : e.args.positional) visit(arg);
  for (auto& arg : e.args.keyword) visit(arg.second);
}

}  // namespace

Expr::~Expr() {
  std::vector<ExprPtr> pending;
  auto take = [&](ExprPtr& child) {
    if (child) pending.push_back(std::move(child));
  };
  for_each_child(*this, take);
  while (!pending.empty()) {
    ExprPtr e = std::move(pending.back());
    pending.pop_back();
    for_each_child(*e, take);  // e is destroyed childless at the end of this iteration
  }
}

int nesting_depth(const Body& top) {
  std::vector<std::pair<const Expr*, int>> exprs;
  std::vector<std::pair<const Body*, int>> bodies{{&top, 1}};
  int deepest = 0;
  auto expr = [&](const ExprPtr& e, int depth) {
    if (e) exprs.emplace_back(e.get(), depth);
  };
  while (!bodies.empty() || !exprs.empty()) {
    if (!exprs.empty()) {
      const Expr* e = exprs.back().first;
      const int depth = exprs.back().second;  // not a structured binding: the lambda below captures it
      exprs.pop_back();
      deepest = std::max(deepest, depth);
      for_each_child(const_cast<Expr&>(*e), [&](const ExprPtr& child) { expr(child, depth + 1); });
      continue;
    }
    const Body* body = bodies.back().first;
    const int depth = bodies.back().second;
    bodies.pop_back();
    deepest = std::max(deepest, depth);
    for (const StmtPtr& s : *body) {
      expr(s->expr, depth + 1);
      expr(s->cond, depth + 1);
      for (const auto& [cond, branch] : s->branches) {
        expr(cond, depth + 1);
        bodies.emplace_back(&branch, depth + 1);
      }
      bodies.emplace_back(&s->body, depth + 1);
      bodies.emplace_back(&s->else_body, depth + 1);
      for (const MacroParam& p : s->params) expr(p.default_value, depth + 1);
      for (const ExprPtr& f : s->filters) expr(f, depth + 1);
      for (const auto& a : s->assignments) expr(a.second, depth + 1);
    }
  }
  return deepest;
}

}  // namespace grpo::tok::jinja
