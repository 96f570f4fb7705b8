// Tools in chat templates (transformers' apply_chat_template(..., tools=)):
// the system turn in which Qwen2.5 and Qwen3 describe the functions a model
// may call, and the `tojson` filter those templates print them with.
// Internal to the tokenizer library; callers set ChatOptions::tools_json.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"

namespace grpo::tok {

// What to do when tools meet a format that does not describe them. It names
// only formats that do: another built-in one (qwen2) would be a second refusal.
inline constexpr const char* kToolTemplates =
    "a handler with tools needs a format that describes them: --template qwen2_5 or qwen3, or a model whose own "
    "chat template renders `tools` (--template jinja)";

// json.dumps(s, ensure_ascii=False) of one string: transformers' `tojson`.
std::string python_json_string(std::string_view s);

// json.dumps(value, ensure_ascii=False) with Python's default separators
// (", " and ": ") and the keys in their given order: `tojson` on any value.
std::string python_json_dumps(const nlohmann::ordered_json& value);

// The system turn a tools-aware template writes first: `system` (the first
// message's content, or null for none) followed by the "# Tools" section
// listing every schema of the JSON array `tools_json`. Throws
// ChatTemplateError for a family whose template has no tools section, or for
// tools_json that is not a JSON array of objects.
std::string tools_system_turn(ChatFamily family, const std::string* system, const std::string& tools_json);

}  // namespace grpo::tok
