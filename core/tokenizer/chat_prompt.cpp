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

}  // namespace grpo::tok
