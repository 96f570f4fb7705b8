#include "tokenizer/jinja/error.h"

namespace grpo::tok::jinja {

JinjaError::JinjaError(const std::string& detail, int line, bool raised_by_template)
    : UserError(raised_by_template || line <= 0 ? detail
                                                : "chat template line " + std::to_string(line) + ": " + detail),
      detail_(detail),
      line_(line),
      raised_by_template_(raised_by_template) {}

JinjaError JinjaError::at_line(int line) const {
  return line_ > 0 ? *this : JinjaError(detail_, line, raised_by_template_);
}

}  // namespace grpo::tok::jinja
