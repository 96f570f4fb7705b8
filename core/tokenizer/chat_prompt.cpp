#include "tokenizer/chat_prompt.h"

#include <map>
#include <memory>
#include <mutex>

#include <nlohmann/json.hpp>

#include "tokenizer/jinja/template.h"

namespace grpo::tok {
namespace {

constexpr const char* kBuiltIn = "--template chatml|qwen2|qwen2_5|qwen3|llama3|llama3_1";

// Each template text is parsed once: a run renders every prompt with the same one.
const jinja::Template& parsed(const std::string& text) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const jinja::Template>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto& entry = cache[text];
  try {
    if (!entry) entry = std::make_shared<const jinja::Template>(text);
  } catch (const jinja::JinjaError& e) {
    throw ChatTemplateError(std::string("the model's chat template cannot be read: ") + e.what() +
                            "; choose a built-in format with " + kBuiltIn);
  }
  return *entry;
}

std::string render_jinja(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages,
                         const ChatOptions& options) {
  nlohmann::ordered_json context;
  context["messages"] = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) context["messages"].push_back({{"role", m.role}, {"content", m.content}});
  // transformers passes tools and documents as None when absent, and extra
  // keyword arguments (enable_thinking) only when the caller gives them.
  context["tools"] = options.tools_json.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json::parse(options.tools_json);
  context["documents"] = nullptr;
  context["add_generation_prompt"] = options.add_generation_prompt;
  if (!options.enable_thinking) context["enable_thinking"] = false;
  for (const auto& [name, id] : {std::pair{"bos_token", tokenizer.bos_id()}, std::pair{"eos_token", tokenizer.eos_id()},
                                 std::pair{"pad_token", tokenizer.pad_id()}, std::pair{"unk_token", tokenizer.unk_id()}})
    if (id) context[name] = tokenizer.id_to_token(*id);
  try {
    jinja::RenderOptions render;
    render.now = options.now;
    return parsed(tokenizer.chat_template()).render(context, render);
  } catch (const jinja::JinjaError& e) {
    throw ChatTemplateError(std::string("the model's chat template: ") + e.what());
  }
}

}  // namespace

ChatFamily chat_family_for(const Tokenizer& tokenizer, const std::string& template_flag) {
  const ChatFamily chosen = template_flag.empty() ? ChatFamily::Jinja : parse_chat_family(template_flag);
  if (!template_flag.empty() && chosen != ChatFamily::Jinja) return chosen;
  if (tokenizer.chat_template().empty())
    throw ChatTemplateError(
        std::string("the tokenizer has no chat template (tokenizer_config.json has no chat_template and there is no "
                    "chat_template.jinja); choose one with ") + kBuiltIn);
  if (template_flag.empty()) {
    try {
      return detect_chat_family(tokenizer.chat_template());
    } catch (const ChatTemplateError&) {
      // Not one of the native families: the template itself is interpreted.
    }
  }
  parsed(tokenizer.chat_template());  // a template the engine cannot read is an error now, not at the first prompt
  return ChatFamily::Jinja;
}

std::string render_chat(const Tokenizer& tokenizer, ChatFamily family, const std::vector<ChatMessage>& messages,
                        const ChatOptions& options) {
  if (family != ChatFamily::Jinja) return render_chat(family, messages, options);
  validate_messages(messages);
  return render_jinja(tokenizer, messages, options);
}

std::vector<int32_t> encode_chat_prompt(const Tokenizer& tokenizer, ChatFamily family,
                                        const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  return tokenizer.encode(render_chat(tokenizer, family, messages, options), /*add_special_tokens=*/false);
}

std::string render_continuation(const Tokenizer& tokenizer, ChatFamily family, const std::vector<ChatMessage>& appended,
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
  const std::string full = render_chat(tokenizer, family, messages, o);
  const size_t at = full.rfind(kMarker);
  if (at == std::string::npos) throw ChatTemplateError("the chat template dropped an assistant turn's content");
  std::string text = full.substr(at + kMarker.size());
  if (!last_sampled.empty() && text.compare(0, last_sampled.size(), last_sampled) == 0)
    text.erase(0, last_sampled.size());
  return text;
}

}  // namespace grpo::tok
