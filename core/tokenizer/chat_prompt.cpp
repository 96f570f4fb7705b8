#include "tokenizer/chat_prompt.h"

namespace grpo::tok {

ChatFamily chat_family_for(const Tokenizer& tokenizer, const std::string& template_flag) {
  if (!template_flag.empty()) return parse_chat_family(template_flag);
  if (tokenizer.chat_template().empty())
    throw ChatTemplateError(
        "the tokenizer has no chat template (tokenizer_config.json has no chat_template); choose one with "
        "--template chatml|qwen2|qwen2_5|qwen3|llama3|llama3_1");
  return detect_chat_family(tokenizer.chat_template());
}

std::vector<int32_t> encode_chat_prompt(const Tokenizer& tokenizer, ChatFamily family,
                                        const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  return tokenizer.encode(render_chat(family, messages, options), /*add_special_tokens=*/false);
}

std::string render_continuation(ChatFamily family, const std::vector<ChatMessage>& appended,
                                const std::string& last_sampled, const ChatOptions& options) {
  // Rendered after a stand-in conversation and cut after its assistant turn's
  // content: what precedes that turn (default system prompts, Qwen3's
  // reasoning of earlier turns) cannot leak into the continuation.
  // No whitespace in it: Llama's template strips message contents.
  static const std::string kMarker = "grpo-turn-end-5f0c9b";
  std::vector<ChatMessage> messages = {{"user", "?"}, {"assistant", kMarker}};
  messages.insert(messages.end(), appended.begin(), appended.end());
  ChatOptions o = options;
  o.tools_json.clear();  // tools are described once, in the prompt's system turn
  const std::string full = render_chat(family, messages, o);
  const size_t at = full.rfind(kMarker);
  if (at == std::string::npos) throw ChatTemplateError("the chat template dropped an assistant turn's content");
  std::string text = full.substr(at + kMarker.size());
  if (!last_sampled.empty() && text.compare(0, last_sampled.size(), last_sampled) == 0)
    text.erase(0, last_sampled.size());
  return text;
}

}  // namespace grpo::tok
