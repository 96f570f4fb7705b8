// Chat messages from a dataset row's JSON, checked before any template sees them.
#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"

namespace grpo::tok {

namespace {

template <typename Json>
bool has_tool_calls(const Json& m) {
  const auto calls = m.find("tool_calls");
  return calls != m.end() && !calls->is_null() && !(calls->is_array() && calls->empty());
}

}  // namespace

std::vector<std::string> extra_message_fields(const ChatMessage& message) {
  std::vector<std::string> names;
  if (!message.fields) return names;
  for (auto it = message.fields->begin(); it != message.fields->end(); ++it) {
    if (it.key() == "role" || it.key() == "content") continue;
    if (it.key() == "tool_calls" && !has_tool_calls(*message.fields)) continue;
    names.push_back(it.key());
  }
  return names;
}

bool is_chat_role(const std::string& role) {
  return role == "system" || role == "user" || role == "assistant" || role == "tool";
}

namespace {

template <typename Json>
std::vector<ChatMessage> read_messages(const Json& messages) {
  if (!messages.is_array()) throw ChatTemplateError("messages must be a list of {role, content} objects");
  std::vector<ChatMessage> out;
  out.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw ChatTemplateError(where + " must be an object with role and content");
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) throw ChatTemplateError(where + ".role must be a string");
    ChatMessage msg{role->template get<std::string>(), {}};
    if (!is_chat_role(msg.role)) {
      throw ChatTemplateError(where + ".role \"" + msg.role + "\" is not one of system, user, assistant, tool");
    }
    const auto content = m.find("content");
    // An assistant turn that only calls tools has no content (OpenAI's and transformers' convention).
    const bool absent = content == m.end() || content->is_null();
    if (absent && has_tool_calls(m)) {
      msg.fields = std::make_shared<const nlohmann::ordered_json>(m);
      out.push_back(std::move(msg));
      continue;
    }
    if (absent || !(content->is_string() || content->is_array())) {
      throw ChatTemplateError(where + ".content must be a string or a list of {type: \"text\", text} parts");
    }
    if (content->is_string()) {
      msg.content = content->template get<std::string>();
    } else {
      for (size_t k = 0; k < content->size(); ++k) {
        const Json& part = (*content)[k];
        const std::string part_where = where + ".content[" + std::to_string(k) + "]";
        if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
          throw ChatTemplateError(part_where + " must be an object {type: \"text\", text}");
        }
        const Json& type = part["type"];
        if (type != "text") {
          throw ChatTemplateError(part_where + " has type \"" + type.template get<std::string>() +
                                  "\"; only text parts can be rendered");
        }
        const auto text = part.find("text");
        if (text == part.end() || !text->is_string()) throw ChatTemplateError(part_where + ".text must be a string");
        msg.content += text->template get<std::string>();
      }
    }
    msg.fields = std::make_shared<const nlohmann::ordered_json>(m);
    out.push_back(std::move(msg));
  }
  return out;
}

}  // namespace

std::vector<ChatMessage> messages_from_json(const nlohmann::json& messages) { return read_messages(messages); }
std::vector<ChatMessage> messages_from_json(const nlohmann::ordered_json& messages) { return read_messages(messages); }

}  // namespace grpo::tok
