#include "tokenizer/jinja/template.h"

#include "tokenizer/jinja/ast_queries.h"
#include "tokenizer/jinja/parser.h"
#include "tokenizer/jinja/render.h"

namespace grpo::tok::jinja {

struct Template::Parsed {
  Body body;
};

Template::Template(const std::string& source) {
  auto parsed = std::make_shared<Parsed>();
  parsed->body = parse_template(source);
  parsed_ = std::move(parsed);
}

std::string Template::render(const nlohmann::ordered_json& context) const { return render(context, RenderOptions{}); }

std::string Template::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  return render_body(parsed_->body, context, options);
}

bool Template::mentions(const std::string& name) const { return jinja::mentions(parsed_->body, name); }

std::string render_chat_template(const std::string& source, const nlohmann::ordered_json& context) {
  return Template(source).render(context);
}

}  // namespace grpo::tok::jinja
