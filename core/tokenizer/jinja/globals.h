// The global functions every template sees (globals.cpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/template.h"
#include "tokenizer/jinja/value.h"

namespace grpo::tok::jinja {

std::vector<std::pair<std::string, Value>> global_functions(const RenderOptions& render_options);

}  // namespace grpo::tok::jinja
