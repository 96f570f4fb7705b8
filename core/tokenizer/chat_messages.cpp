// Chat messages from a dataset row's JSON, checked before any template sees them.
#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"

namespace grpo::tok {

bool is_chat_role(const std::string& role) {
  return role == "system" || role == "user" || role == "assistant" || role == "tool";
}

std::vector<ChatMessage> messages_from_json(const nlohmann::json& messages) {
  if (!messages.is_array()) throw ChatTemplateError("messages must be a list of {role, content} objects");
  std::vector<ChatMessage> out;
  out.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const nlohmann::json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw ChatTemplateError(where + " must be an object with role and content");
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) throw ChatTemplateError(where + ".role must be a string");
    ChatMessage msg{role->get<std::string>(), {}};
    if (!is_chat_role(msg.role)) {
      throw ChatTemplateError(where + ".role \"" + msg.role + "\" is not one of system, user, assistant, tool");
    }
    // Tool calls would need the tool-call rendering of each template; dropping
    // them silently would train on a prompt the model never sees in use.
    const auto calls = m.find("tool_calls");
    if (calls != m.end() && !calls->is_null() && !(calls->is_array() && calls->empty())) {
      throw ChatTemplateError(where + " has tool_calls, which grpo-host's chat templates do not render");
    }
    const auto content = m.find("content");
    if (content == m.end() || !(content->is_string() || content->is_array())) {
      throw ChatTemplateError(where + ".content must be a string or a list of {type: \"text\", text} parts");
    }
    if (content->is_string()) {
      msg.content = content->get<std::string>();
    } else {
      for (size_t k = 0; k < content->size(); ++k) {
        const nlohmann::json& part = (*content)[k];
        const std::string part_where = where + ".content[" + std::to_string(k) + "]";
        if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
          throw ChatTemplateError(part_where + " must be an object {type: \"text\", text}");
        }
        const nlohmann::json& type = part["type"];
        if (type != "text") {
          throw ChatTemplateError(part_where + " has type \"" + type.get<std::string>() +
                                  "\"; only text parts can be rendered");
        }
        const auto text = part.find("text");
        if (text == part.end() || !text->is_string()) throw ChatTemplateError(part_where + ".text must be a string");
        msg.content += text->get<std::string>();
      }
    }
    out.push_back(std::move(msg));
  }
  return out;
}

}  // namespace grpo::tok
