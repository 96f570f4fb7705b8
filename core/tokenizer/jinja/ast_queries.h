// Questions about a parsed template: whether an expression or body mentions
// a variable (jinja gives a macro `varargs`, `kwargs` and `caller` only when
// its body uses them).
#pragma once

#include <string>

#include "tokenizer/jinja/ast.h"

namespace grpo::tok::jinja {

bool mentions(const Expr* e, const std::string& name);
bool mentions(const Body& body, const std::string& name);

}  // namespace grpo::tok::jinja
