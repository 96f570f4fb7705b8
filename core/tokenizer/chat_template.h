// Chat templates: a dataset row's messages rendered as the prompt text a
// model expects, exactly as transformers'
//   tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
// renders it with the model's own Jinja template. The known families are
// implemented natively, so a template is first mapped to its family; any other
// template is the Jinja family, rendered by the Jinja engine (tokenizer/jinja)
// through the overloads in chat_prompt.h, which have the tokenizer:
//
//   auto family = grpo::tok::detect_chat_family(tokenizer.chat_template());
//   std::string prompt = grpo::tok::render_chat(family, grpo::tok::messages_from_json(row["messages"]));
//   auto ids = tokenizer.encode(prompt, /*add_special_tokens=*/false);
//
// The native families render text conversations (role and content); a
// message's other fields (tool_calls, tool_call_id, name, reasoning_content)
// reach Jinja templates, as transformers passes them. No images.
// Tool schemas (ChatOptions::tools_json) are rendered for Qwen2.5, Qwen3 and
// by any Jinja template that renders `tools`.
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <stdexcept>
#include <string>
#include <vector>
#include "util/user_error.h"

namespace grpo::tok {

enum class ChatFamily {
  ChatML,    // <|im_start|>{role}\n{content}<|im_end|>\n, no default system prompt
  Qwen2,     // ChatML + default system prompt "You are a helpful assistant."
  Qwen2_5,   // ChatML + Qwen2.5's default system prompt, tool turns as <tool_response>
  Qwen3,     // ChatML + reasoning stripped from history, enable_thinking
  Llama3,    // Llama 3.0 headers
  Llama3_1,  // Llama 3.1 / 3.2 / 3.3: always a system block with the dates
  Jinja,     // the tokenizer's own chat_template, interpreted (Mistral, Gemma, DeepSeek, ...)
};

struct ChatMessage {
  std::string role;  // system, user, assistant or tool
  std::string content;
  // The message as the dataset wrote it, for Jinja templates, which see
  // every field (tool_calls, tool_call_id, name, reasoning_content); null
  // for a message built in code. role and content above are authoritative.
  std::shared_ptr<const nlohmann::ordered_json> fields;
};

// The fields of a message besides role and content ("tool_calls", ...), which
// only a Jinja template renders; a null tool_calls or an empty list of them
// counts as absent.
std::vector<std::string> extra_message_fields(const ChatMessage& message);

struct ChatOptions {
  bool add_generation_prompt = true;
  // Qwen3 only: false appends an empty <think></think> block to the
  // generation prompt, as the template does for enable_thinking=False.
  bool enable_thinking = true;
  // Llama 3.1+ only: the template's date_string. Llama 3.2's template takes
  // today's date under transformers unless date_string is passed, so pass
  // the date the reference run used to reproduce it.
  std::string date = "26 Jul 2024";
  // Jinja templates only: the local time their strftime_now() formats (Llama
  // 3.2 prints today's date, as under transformers). Unset: the system clock.
  std::function<std::tm()> now;
  // transformers' `tools=`: a JSON array of function schemas, described in
  // the system turn (Qwen2.5 and Qwen3 only; other families throw). Empty: none.
  std::string tools_json;
};

class ChatTemplateError : public ::grpo::UserError {
 public:
  using UserError::UserError;
};

// Maps a tokenizer's chat_template text to the native family it implements.
// Throws ChatTemplateError, naming --template, for a template no native family
// renders faithfully (another model family, an unknown default system prompt,
// reasoning handling that plain ChatML lacks): chat_family_for then takes Jinja.
ChatFamily detect_chat_family(const std::string& template_text);

// The --template names: chatml, qwen2, qwen2_5, qwen3, llama3, llama3_1
// (dots accepted for underscores; llama3_2 and llama3_3 mean llama3_1), and
// jinja: the model's own template even where a native family would match.
// Throws ChatTemplateError listing the valid names.
ChatFamily parse_chat_family(const std::string& name);

// The canonical --template name of a family.
const char* chat_family_name(ChatFamily family);

// True for the families that describe tool schemas (ChatOptions::tools_json):
// Qwen2.5, Qwen3, and Jinja (where the template itself decides).
bool chat_family_renders_tools(ChatFamily family);

// True when render_chat's text already starts with the bos token
// (<|begin_of_text|> for Llama 3), so the caller must not add another.
bool chat_family_emits_bos(ChatFamily family);

// Throws ChatTemplateError for an empty list or a role other than system,
// user, assistant and tool. The Jinja family needs the tokenizer's template:
// render it with render_chat(tokenizer, ...) of chat_prompt.h.
std::string render_chat(ChatFamily family, const std::vector<ChatMessage>& messages,
                        const ChatOptions& options = {});

// Throws ChatTemplateError for an empty list or a role is_chat_role refuses.
void validate_messages(const std::vector<ChatMessage>& messages);

// True for the roles the templates render: system, user, assistant, tool.
bool is_chat_role(const std::string& role);

// [{"role": ..., "content": ...}] where content is a string or a list of
// {"type": "text", "text": ...} parts (joined with nothing between them, as
// transformers' multimodal templates join text parts); an assistant turn
// with tool_calls may have no content (null). Every other field is kept in
// ChatMessage::fields. Throws ChatTemplateError naming the message index on a
// malformed entry. Read as ordered_json, a message's fields keep their order
// (a template printing a tool call's dict prints it in that order, as Python).
std::vector<ChatMessage> messages_from_json(const nlohmann::json& messages);
std::vector<ChatMessage> messages_from_json(const nlohmann::ordered_json& messages);

}  // namespace grpo::tok
