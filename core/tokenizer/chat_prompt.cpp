#include "tokenizer/chat_prompt.h"

#include <map>
#include <memory>
#include <mutex>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_tools.h"
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

bool mentions_tools(const Tokenizer& tokenizer) { return parsed(tokenizer.chat_template()).mentions("tools"); }

// A message as transformers hands it to the template: every field the
// dataset gave (tool_calls, tool_call_id, name, reasoning_content, ...), with
// text parts joined into the content string. A turn that only calls tools
// keeps its null (or absent) content: templates test `content is none`.
nlohmann::ordered_json template_message(const ChatMessage& m) {
  nlohmann::ordered_json out = {{"role", m.role}, {"content", m.content}};
  if (!m.fields) return out;
  const auto content = m.fields->find("content");
  if (content == m.fields->end()) out.erase("content");
  else if (content->is_null()) out["content"] = nullptr;
  for (auto it = m.fields->begin(); it != m.fields->end(); ++it)
    if (it.key() != "role" && it.key() != "content") out[it.key()] = it.value();
  return out;
}

std::string render_jinja(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages,
                         const ChatOptions& options) {
  nlohmann::ordered_json context;
  context["messages"] = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) context["messages"].push_back(template_message(m));
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

// The conversations on which a built-in format must write exactly what the
// model's template writes before it may stand in for it: system or not,
// several turns, whitespace a template might trim, a tool turn, Qwen3's
// reasoning in history, with and without the generation prompt and thinking.
struct Probe {
  std::vector<ChatMessage> messages;
  ChatOptions options;
};

std::vector<Probe> probes(ChatFamily family) {
  const std::vector<std::vector<ChatMessage>> chats = {
      {{"user", "Hi"}},
      {{"system", "Be brief."}, {"user", " What is 2+2?\n"}, {"assistant", "4 "}, {"user", "And 3+3?"}},
      {{"user", "Q"}, {"assistant", "<think>\nhm\n</think>\n\nA"}, {"user", "weather?"},
       {"assistant", "Checking."}, {"tool", "{\"temp\": 21}"}, {"user", "thanks"}},
  };
  std::vector<Probe> out;
  for (const auto& chat : chats) {
    for (bool generation : {true, false}) {
      Probe p{chat, {}};
      p.options.add_generation_prompt = generation;
      // One fixed day for both, which the built-in Llama 3.1 format prints as its date.
      p.options.now = [] {
        std::tm t{};
        t.tm_year = 124, t.tm_mon = 6, t.tm_mday = 26, t.tm_hour = 12;
        return t;
      };
      out.push_back(p);
      if (family == ChatFamily::Qwen3) {
        p.options.enable_thinking = false;
        out.push_back(p);
      }
    }
  }
  if (chat_family_renders_tools(family)) {
    Probe p{chats[1], {}};
    p.options.tools_json =
        R"([{"type": "function", "function": {"name": "add", "description": "Adds.", "parameters": {"type": "object", )"
        R"("properties": {"a": {"type": "integer"}}, "required": ["a"]}}}])";
    out.push_back(p);
  }
  return out;
}

// Whether `family`, a built-in format, renders every probe byte for byte as
// the tokenizer's own template does: only then may it replace the template.
// Remembered per template, special tokens and family (one check per run).
bool stands_in_for_template(const Tokenizer& tokenizer, ChatFamily family) {
  if (family == ChatFamily::Jinja || tokenizer.chat_template().empty()) return false;
  static std::mutex mutex;
  static std::map<std::string, bool> known;
  std::string key = std::to_string(static_cast<int>(family)) + '\0' + tokenizer.chat_template();
  for (auto id : {tokenizer.bos_id(), tokenizer.eos_id()}) key += '\0' + (id ? tokenizer.id_to_token(*id) : "");
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  bool same = true;
  try {
    for (const Probe& p : probes(family)) {
      if (render_chat(family, p.messages, p.options) != render_jinja(tokenizer, p.messages, p.options)) {
        same = false;
        break;
      }
    }
  } catch (const ChatTemplateError&) {
    same = false;  // one of the two refuses a probe the other renders
  }
  std::lock_guard<std::mutex> lock(mutex);
  known[key] = same;
  return same;
}

// Whether rendering needs more than the built-in format of `family` renders:
// message fields besides role and content, or tools it has no section for.
bool needs_template(ChatFamily family, const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  if (!options.tools_json.empty() && !chat_family_renders_tools(family)) return true;
  for (const ChatMessage& m : messages)
    if (!extra_message_fields(m).empty()) return true;
  return false;
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
      // A built-in format replaces the model's template only where proven to write the same bytes:
      // a template that merely looks like one (Phi-4's ChatML with <|im_sep|>) is interpreted.
      const ChatFamily family = detect_chat_family(tokenizer.chat_template());
      parsed(tokenizer.chat_template());
      if (stands_in_for_template(tokenizer, family)) return family;
    } catch (const ChatTemplateError&) {
      // Not one of the native families: the template itself is interpreted.
    }
  }
  parsed(tokenizer.chat_template());  // a template the engine cannot read is an error now, not at the first prompt
  return ChatFamily::Jinja;
}

std::string render_chat(const Tokenizer& tokenizer, ChatFamily family, const std::vector<ChatMessage>& messages,
                        const ChatOptions& options) {
  // A built-in format proven to match the model's template hands over to the
  // template what only the template renders (tool calls, tools for Llama 3.1).
  if (family != ChatFamily::Jinja &&
      !(needs_template(family, messages, options) && stands_in_for_template(tokenizer, family)))
    return render_chat(family, messages, options);
  validate_messages(messages);
  if (!options.tools_json.empty() && !mentions_tools(tokenizer))
    throw ChatTemplateError("the model's chat template does not describe tools; " + std::string(kToolTemplates));
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
