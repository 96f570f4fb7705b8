#include "tool_call.h"

#include <grpo/sdk_json.hpp>

#include "rational.h"
#include "text.h"

namespace grpo::calculator {

std::string answer(std::string_view body, bool* failed) {
  *failed = true;
  grpo::Json call;
  try {
    call = grpo::Json::parse(body);
  } catch (const std::exception& e) {
    return "error: the tool call is not valid JSON (" + excerpt(e.what()) +
           "); write {\"name\": \"calculator\", \"arguments\": {\"expression\": \"...\"}}";
  }
  const grpo::Json* name = call.is_object() ? call.find("name") : nullptr;
  if (!name || !name->is_string()) return "error: the tool call has no \"name\"";
  // The name is the policy's text, any bytes (a JSON \ud800 escape decodes to a lone surrogate).
  if (name->as_string() != "calculator")
    return "error: there is no tool \"" + excerpt(name->as_string()) + "\"; use calculator";
  const grpo::Json* args = call.find("arguments");
  const grpo::Json* expression = args && args->is_object() ? args->find("expression") : nullptr;
  if (!expression || !expression->is_string()) return "error: calculator needs arguments {\"expression\": \"...\"}";
  try {
    const std::string value = format(evaluate(expression->as_string()));
    *failed = false;
    return value;
  } catch (const ExpressionError& e) {
    return std::string("error: ") + e.what();
  }
}

}  // namespace grpo::calculator
