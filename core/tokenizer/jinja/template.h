// A Jinja2 interpreter for Hugging Face chat templates. It renders a
// tokenizer's `chat_template` byte for byte as transformers'
// apply_chat_template does with Python's jinja2: a sandboxed environment with
// trim_blocks and lstrip_blocks, the loop controls, {% generation %} blocks,
// a json.dumps-based tojson filter, and the raise_exception() and
// strftime_now() globals.
//
//   grpo::tok::jinja::Template t(tokenizer_config["chat_template"]);
//   std::string prompt = t.render({{"messages", messages}, {"add_generation_prompt", true},
//                                  {"bos_token", "<s>"}, {"tools", nullptr}});
//
// The context's keys are the template's variables; JSON objects become dicts
// in their order, as Python's json module reads them. transformers passes
// `tools` and `documents` as None when absent, so a caller reproducing it
// passes null rather than leaving them out.
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/jinja/error.h"

namespace grpo::tok::jinja {

struct RenderOptions {
  // The local time strftime_now() formats. Empty: the system clock. Tests
  // inject a fixed time to reproduce templates that print today's date.
  std::function<std::tm()> now;
};

class Template {
 public:
  // Parses once; throws JinjaError for syntax errors and unsupported tags.
  explicit Template(const std::string& source);

  // Throws JinjaError for runtime errors (naming the template line) and with
  // the template's own message when it calls raise_exception().
  std::string render(const nlohmann::ordered_json& context) const;
  std::string render(const nlohmann::ordered_json& context, const RenderOptions& options) const;
  // Whether any expression names the variable (e.g. `tools`): a template that
  // never does would drop that context key silently.
  bool mentions(const std::string& name) const;

 private:
  struct Parsed;
  std::shared_ptr<const Parsed> parsed_;
};

std::string render_chat_template(const std::string& source, const nlohmann::ordered_json& context);

}  // namespace grpo::tok::jinja
