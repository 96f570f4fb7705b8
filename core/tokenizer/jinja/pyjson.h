// Python's json.dumps, which transformers installs as the templates' tojson
// filter: json.dumps(x, ensure_ascii=False, indent=indent,
// separators=separators, sort_keys=sort_keys). Its output differs from
// nlohmann's dump (", " and ": " separators, Python float repr, NaN), and
// the rendered prompt must match it byte for byte.
#pragma once

#include <optional>
#include <string>

#include "tokenizer/jinja/value.h"

namespace grpo::tok::jinja {

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // the text of one level; absent: one line
  std::optional<std::string> item_separator;  // default ", " on one line, "," when indenting
  std::optional<std::string> key_separator;   // default ": "
  bool sort_keys = false;
};

// Throws JinjaError for values JSON cannot hold, as Python raises TypeError.
std::string json_dumps(const Value& value, const JsonDumpOptions& options);

}  // namespace grpo::tok::jinja
