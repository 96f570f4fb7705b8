// Text a plugin hands the host (tool messages, error and log messages,
// metric names, tool schemas) is repaired to UTF-8 where it enters, by the
// rule every text of a run follows: each invalid sequence becomes U+FFFD.
// A plugin's bytes then never reach a JSON writer (the completions log, the
// metrics, the next turn's conversation) as they are, where one stray byte
// of `12 × 34` stopped the run steps later.
#pragma once

#include <cstring>
#include <string>
#include <string_view>

#include <grpo/status.h>

#include "tokenizer/utf8.h"

namespace grpo::plugins {

inline std::string plugin_text(grpo_str s) {
  if (!s.data) return {};
  return tok::utf8::to_valid_lossy(std::string_view(s.data, s.size));
}

// A grpo_error's message, bounded by its buffer: a plugin that fills it
// without the terminating NUL is cut there, not read past.
inline std::string error_text(const grpo_error& err) {
  return tok::utf8::to_valid_lossy(std::string_view(err.message, strnlen(err.message, sizeof err.message)));
}

}  // namespace grpo::plugins
