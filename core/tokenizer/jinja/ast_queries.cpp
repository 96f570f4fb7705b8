#include "tokenizer/jinja/ast_queries.h"

namespace grpo::tok::jinja {
namespace {

bool mentions_args(const ArgList& a, const std::string& name) {
  for (const auto& p : a.positional)
    if (mentions(p.get(), name)) return true;
  for (const auto& k : a.keyword)
    if (mentions(k.second.get(), name)) return true;
  return mentions(a.star.get(), name) || mentions(a.star_star.get(), name);
}

}  // namespace

bool mentions(const Expr* e, const std::string& name) {
  if (!e) return false;
  if (e->kind == Expr::Kind::Name && e->name == name) return true;
  if (mentions(e->a.get(), name) || mentions(e->b.get(), name) || mentions(e->c.get(), name)) return true;
  for (const auto& i : e->items)
    if (mentions(i.get(), name)) return true;
  return mentions_args(e->args, name);
}

bool mentions(const Body& body, const std::string& name) {
  for (const auto& s : body) {
    if (mentions(s->expr.get(), name) || mentions(s->cond.get(), name)) return true;
    for (const auto& [cond, b] : s->branches)
      if (mentions(cond.get(), name) || mentions(b, name)) return true;
    if (mentions(s->body, name) || mentions(s->else_body, name)) return true;
    for (const auto& p : s->params)
      if (mentions(p.default_value.get(), name)) return true;
    for (const auto& f : s->filters)
      if (mentions(f.get(), name)) return true;
    for (const auto& a : s->assignments)
      if (mentions(a.second.get(), name)) return true;
  }
  return false;
}

}  // namespace grpo::tok::jinja
