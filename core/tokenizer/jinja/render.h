// Executes a parsed template: jinja's scoping (a for loop's body and a macro
// get their own scope, if-blocks do not; namespaces carry values out of
// loops), loop variables, macros and call blocks, and the globals.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/template.h"

namespace grpo::tok::jinja {

std::string render_body(const Body& body, const nlohmann::ordered_json& context, const RenderOptions& options);

}  // namespace grpo::tok::jinja
