// JinjaError: every failure of the chat-template engine — a syntax error, a
// construct the engine does not implement, a runtime error such as adding a
// string to a number, and the template's own raise_exception(). A chat
// template comes from the user's model, so these are user errors.
#pragma once

#include <string>

#include "util/user_error.h"

namespace grpo::tok::jinja {

class JinjaError : public ::grpo::UserError {
 public:
  // `line` 0 means the line is not known yet: the renderer fills it in as the
  // error passes the statement or expression that raised it. A message raised
  // by the template itself (raise_exception) is kept exactly as written.
  explicit JinjaError(const std::string& detail, int line = 0, bool raised_by_template = false);

  const std::string& detail() const { return detail_; }
  int line() const { return line_; }
  bool raised_by_template() const { return raised_by_template_; }

  // The same error located at `line` (no change when it already has a line).
  JinjaError at_line(int line) const;

 private:
  std::string detail_;
  int line_;
  bool raised_by_template_;
};

}  // namespace grpo::tok::jinja
