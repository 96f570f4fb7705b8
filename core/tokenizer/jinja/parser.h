// Builds the statement tree of a template from its tokens, following
// jinja2's grammar (operator precedence, tests taking one bare argument,
// `a if b` without else, slices, filters with dotted names).
#pragma once

#include <string>

#include "tokenizer/jinja/ast.h"

namespace grpo::tok::jinja {

// Throws JinjaError naming the line for syntax errors and for tags the
// engine does not implement (extends, include, import, block, ...).
Body parse_template(const std::string& source);

}  // namespace grpo::tok::jinja
