// The renderer's variables: one level per block, macro call or loop body.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace grpo::tok::jinja {

struct Scope;
using ScopePtr = std::shared_ptr<Scope>;

// One level of variables; lookups fall through to the enclosing scopes.
struct Scope {
  explicit Scope(ScopePtr p = nullptr) : parent(std::move(p)) {}

  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get())
      for (const auto& kv : s->vars)
        if (kv.first == name) return &kv.second;
    return nullptr;
  }

  void set(const std::string& name, Value v) {
    for (auto& kv : vars) {
      if (kv.first == name) {
        kv.second = std::move(v);
        return;
      }
    }
    vars.emplace_back(name, std::move(v));
  }

  ScopePtr parent;
  std::vector<std::pair<std::string, Value>> vars;
};

}  // namespace grpo::tok::jinja
