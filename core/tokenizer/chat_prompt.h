// Prompts as token ids: chat messages rendered in the model's chat format.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace grpo::tok {

// The chat family: `template_flag` (--template) when set, else detected from
// the tokenizer's chat template: a native family when it renders a set of
// probe conversations byte for byte as the template does, else Jinja (the
// template itself, interpreted). Throws
// ChatTemplateError naming --template when there is no template or the Jinja
// engine cannot read it.
ChatFamily chat_family_for(const Tokenizer& tokenizer, const std::string& template_flag);

// render_chat for every family: Jinja renders the tokenizer's template with
// what transformers' apply_chat_template passes it (messages with all their
// fields, tools, add_generation_prompt, enable_thinking when false, the
// special tokens). A native family proven to match the template hands it what
// the native code cannot render (message fields besides role and content,
// tools it has no section for). Tools for a template that never reads
// `tools` are a ChatTemplateError.
std::string render_chat(const Tokenizer& tokenizer, ChatFamily family, const std::vector<ChatMessage>& messages,
                        const ChatOptions& options = {});

// The ids of `messages` followed by the generation prompt. The rendered text
// carries its own special tokens, so none are added.
std::vector<int32_t> encode_chat_prompt(const Tokenizer& tokenizer, ChatFamily family,
                                        const std::vector<ChatMessage>& messages, const ChatOptions& options = {});

// What follows a finished assistant turn when `appended` messages (user or
// tool turns of a multi-turn rollout) are added and the model answers again:
// the rest of the turn's closing, the appended turns and the generation
// prompt, as the template renders them after that turn. `last_sampled`, the
// turn's last token as sampled (special tokens kept), is left out when the
// closing starts with it (the policy already wrote <|im_end|>). Throws
// ChatTemplateError for a role the template does not render.
std::string render_continuation(const Tokenizer& tokenizer, ChatFamily family, const std::vector<ChatMessage>& appended,
                                const std::string& last_sampled, const ChatOptions& options = {});

}  // namespace grpo::tok
