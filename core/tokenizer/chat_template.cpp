// Native renderings of the chat templates of Qwen2, Qwen2.5, Qwen3, Llama 3
// and Llama 3.1+, each following its Jinja template line by line for plain
// text messages (no tool_calls, no reasoning_content); Qwen2.5 and Qwen3 also
// with a tools argument (chat_tools.cpp).
// Where a template uses a Python string method, the helper here reproduces
// that method's exact semantics, since one differing newline changes the
// token ids the policy is trained on.
#include "tokenizer/chat_template.h"

#include "tokenizer/chat_tools.h"

#include <string_view>

namespace grpo::tok {
namespace {

constexpr const char* kTemplateNames = "chatml|qwen2|qwen2_5|qwen3|llama3|llama3_1|jinja";
constexpr std::string_view kQwen2System = "You are a helpful assistant.";
constexpr std::string_view kQwen2_5System =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
constexpr std::string_view kLlamaBos = "<|begin_of_text|>";

[[noreturn]] void throw_unknown_template(const std::string& why) {
  throw ChatTemplateError("the tokenizer's chat template is not one grpo-host knows (" + why +
                          "); choose one explicitly with --template " + kTemplateNames);
}

// --- Python string semantics -------------------------------------------------

// Python's str.isspace() for one code point: what Jinja's `trim` filter
// (str.strip()) removes, which is more than ASCII whitespace.
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

// Decodes the code point of a well-formed UTF-8 sequence starting at s[i]
// and sets its length; a malformed byte counts as one non-space "character".
char32_t decode_at(std::string_view s, size_t i, size_t* length) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) {
    *length = 1;
    return 0xFFFD;
  }
  char32_t c = n == 1 ? b : b & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto cont = static_cast<unsigned char>(s[i + k]);
    if ((cont & 0xC0) != 0x80) {
      *length = 1;
      return 0xFFFD;
    }
    c = (c << 6) | (cont & 0x3F);
  }
  *length = n;
  return c;
}

// Jinja's `trim` filter: Python's str.strip() with no argument.
std::string python_strip(std::string_view s) {
  size_t begin = std::string_view::npos;
  size_t end = 0;  // one past the last non-space code point
  for (size_t i = 0, n = 0; i < s.size(); i += n) {
    if (is_python_space(decode_at(s, i, &n))) continue;
    if (begin == std::string_view::npos) begin = i;
    end = i + n;
  }
  return begin == std::string_view::npos ? std::string() : std::string(s.substr(begin, end - begin));
}

// str.lstrip('\n'), str.rstrip('\n') and str.strip('\n'): Qwen3 strips only
// newlines around reasoning, never spaces.
std::string_view lstrip_newlines(std::string_view s) {
  const size_t p = s.find_first_not_of('\n');
  return p == std::string_view::npos ? std::string_view() : s.substr(p);
}
std::string_view rstrip_newlines(std::string_view s) {
  const size_t p = s.find_last_not_of('\n');
  return p == std::string_view::npos ? std::string_view() : s.substr(0, p + 1);
}
std::string_view strip_newlines(std::string_view s) { return rstrip_newlines(lstrip_newlines(s)); }

// Qwen3 wraps tool output in a user turn; such a turn is not a new query.
bool is_tool_response(std::string_view s) {
  static constexpr std::string_view kOpen = "<tool_response>", kClose = "</tool_response>";
  return s.size() >= kClose.size() && s.compare(0, kOpen.size(), kOpen) == 0 &&
         s.compare(s.size() - kClose.size(), kClose.size(), kClose) == 0;
}

// --- validation --------------------------------------------------------------

}  // namespace

void validate_messages(const std::vector<ChatMessage>& messages) {
  if (messages.empty()) throw ChatTemplateError("cannot render a chat with no messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!is_chat_role(messages[i].role)) {
      throw ChatTemplateError("message " + std::to_string(i) + ": role \"" + messages[i].role +
                              "\" is not one of system, user, assistant, tool");
    }
  }
}

namespace {

// --- ChatML family -----------------------------------------------------------

void append_im_turn(std::string& out, std::string_view role, std::string_view content) {
  out.append("<|im_start|>").append(role).append("\n").append(content).append("<|im_end|>\n");
}

// Qwen2.5 and Qwen3 wrap tool results in a user turn, one turn for a run of
// consecutive tool messages.
void append_qwen_tool_turn(std::string& out, const std::vector<ChatMessage>& messages, size_t i) {
  if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
  out.append("\n<tool_response>\n").append(messages[i].content).append("\n</tool_response>");
  if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
}

// Generic ChatML and Qwen2: every message is one turn under its own role
// name; Qwen2 first inserts its default system turn.
std::string render_plain_chatml(const std::vector<ChatMessage>& messages, std::string_view default_system) {
  std::string out;
  if (!default_system.empty() && messages.front().role != "system") append_im_turn(out, "system", default_system);
  for (const ChatMessage& m : messages) append_im_turn(out, m.role, m.content);
  return out;
}

std::string render_qwen2_5(const std::vector<ChatMessage>& messages, const std::string& tools) {
  std::string out;
  const bool has_system = messages.front().role == "system";
  if (!tools.empty())
    out = tools_system_turn(ChatFamily::Qwen2_5, has_system ? &messages.front().content : nullptr, tools);
  else
    append_im_turn(out, "system", has_system ? std::string_view(messages.front().content) : kQwen2_5System);
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      append_qwen_tool_turn(out, messages, i);
    } else {
      append_im_turn(out, m.role, m.content);
    }
  }
  return out;
}

std::string render_qwen3(const std::vector<ChatMessage>& messages, const std::string& tools) {
  std::string out;
  const bool has_system = messages.front().role == "system";
  // With tools the first system message goes into the tools turn.
  if (!tools.empty()) out = tools_system_turn(ChatFamily::Qwen3, has_system ? &messages.front().content : nullptr, tools);
  // The last real user query: reasoning is kept only for assistant turns
  // after it. User turns that merely wrap tool output do not count; with no
  // query at all the template's default is the last index.
  size_t last_query = messages.size() - 1;
  for (size_t i = messages.size(); i-- > 0;) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" && !is_tool_response(m.content)) {
      last_query = i;
      break;
    }
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system") {
      if (i == 0 && !tools.empty()) continue;
      // The template prints a first system message before its loop and later
      // ones inside it; both come out as the same turn.
      append_im_turn(out, "system", m.content);
    } else if (m.role == "user") {
      append_im_turn(out, "user", m.content);
    } else if (m.role == "tool") {
      append_qwen_tool_turn(out, messages, i);
    } else {
      // content.split('</think>')[-1].lstrip('\n') and
      // content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
      std::string_view full = m.content;
      std::string_view content = full;
      std::string_view reasoning;
      const size_t first_close = full.find("</think>");
      if (first_close != std::string_view::npos) {
        content = lstrip_newlines(full.substr(full.rfind("</think>") + 8));
        std::string_view before = rstrip_newlines(full.substr(0, first_close));
        const size_t open = before.rfind("<think>");
        if (open != std::string_view::npos) before = before.substr(open + 7);
        reasoning = lstrip_newlines(before);
      }
      out += "<|im_start|>assistant\n";
      if (i > last_query && (i + 1 == messages.size() || !reasoning.empty())) {
        out.append("<think>\n").append(strip_newlines(reasoning)).append("\n</think>\n\n");
        out.append(lstrip_newlines(content));
      } else {
        out.append(content);
      }
      out += "<|im_end|>\n";
    }
  }
  return out;
}

// --- Llama 3 family ----------------------------------------------------------

void append_llama_turn(std::string& out, std::string_view role, std::string_view content) {
  out.append("<|start_header_id|>").append(role).append("<|end_header_id|>\n\n");
  out.append(content).append("<|eot_id|>");
}

std::string render_llama3(const std::vector<ChatMessage>& messages) {
  std::string out(kLlamaBos);
  for (const ChatMessage& m : messages) append_llama_turn(out, m.role, python_strip(m.content));
  return out;
}

std::string render_llama3_1(const std::vector<ChatMessage>& messages, const std::string& date) {
  std::string out(kLlamaBos);
  size_t first = 0;
  std::string system;
  if (messages.front().role == "system") {
    system = python_strip(messages.front().content);
    first = 1;
  }
  append_llama_turn(out, "system",
                    "Cutting Knowledge Date: December 2023\nToday Date: " + date + "\n\n" + system);
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      // A string is `iterable` to Jinja, so the template emits tool output
      // through tojson: quoted and escaped, not trimmed.
      append_llama_turn(out, "ipython", python_json_string(m.content));
    } else {
      append_llama_turn(out, m.role, python_strip(m.content));
    }
  }
  return out;
}

// --- detection ---------------------------------------------------------------

// Literal system prompts the template writes itself, as in Qwen2's
// '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n'. A system
// turn filled from the messages ('<|im_start|>system\n' + ...) has a quote
// right after the newline and is not listed.
std::vector<std::string> literal_system_prompts(const std::string& text) {
  static const std::string kOpen = "<|im_start|>system";
  std::vector<std::string> prompts;
  for (size_t at = text.find(kOpen); at != std::string::npos; at = text.find(kOpen, at + 1)) {
    size_t p = at + kOpen.size();
    if (text.compare(p, 2, "\\n") == 0) {
      p += 2;  // the escape inside a Jinja string literal
    } else if (p < text.size() && text[p] == '\n') {
      p += 1;
    } else {
      continue;
    }
    if (p < text.size() && text[p] == '{') continue;  // raw template text followed by {{ ... }}
    const size_t end = text.find_first_of("'\"<", p);
    if (end == p || end == std::string::npos) continue;
    prompts.push_back(text.substr(p, end - p));
  }
  return prompts;
}

bool contains(const std::string& text, std::string_view needle) { return text.find(needle) != std::string::npos; }

}  // namespace

ChatFamily detect_chat_family(const std::string& text) {
  if (text.empty()) throw_unknown_template("the tokenizer has no chat template");
  if (contains(text, "<|start_header_id|>")) {
    // Both Llama templates print bos_token; one that does not is another format.
    if (!contains(text, "bos_token") && !contains(text, kLlamaBos)) {
      throw_unknown_template("it uses Llama 3 headers but never writes the bos token");
    }
    return contains(text, "Cutting Knowledge Date") ? ChatFamily::Llama3_1 : ChatFamily::Llama3;
  }
  if (!contains(text, "<|im_start|>")) throw_unknown_template("it is neither ChatML nor Llama 3");
  // None of the Qwen templates writes a bos token; one that does (Hermes on
  // Llama, for instance) would lose it here.
  if (contains(text, "bos_token")) throw_unknown_template("it writes the bos token before ChatML turns");
  const std::vector<std::string> prompts = literal_system_prompts(text);
  for (const std::string& p : prompts) {
    if (p != kQwen2System && p != kQwen2_5System) {
      throw_unknown_template("it inserts the default system prompt \"" + p + "\"");
    }
  }
  if (!prompts.empty()) return prompts.front() == kQwen2_5System ? ChatFamily::Qwen2_5 : ChatFamily::Qwen2;
  if (contains(text, "enable_thinking")) return ChatFamily::Qwen3;
  // QwQ and Qwen3's 2507 releases handle <think> differently from Qwen3.
  if (contains(text, "<think>") || contains(text, "</think>")) {
    throw_unknown_template("it handles <think> reasoning but has no enable_thinking switch");
  }
  return ChatFamily::ChatML;
}

ChatFamily parse_chat_family(const std::string& name) {
  std::string key = name;
  for (char& c : key) {
    if (c == '.') c = '_';
  }
  if (key == "chatml") return ChatFamily::ChatML;
  if (key == "qwen2") return ChatFamily::Qwen2;
  if (key == "qwen2_5") return ChatFamily::Qwen2_5;
  if (key == "qwen3") return ChatFamily::Qwen3;
  if (key == "llama3") return ChatFamily::Llama3;
  if (key == "llama3_1" || key == "llama3_2" || key == "llama3_3") return ChatFamily::Llama3_1;
  if (key == "jinja") return ChatFamily::Jinja;
  throw ChatTemplateError("unknown chat template \"" + name + "\": --template takes one of " +
                          kTemplateNames);
}

const char* chat_family_name(ChatFamily family) {
  switch (family) {
    case ChatFamily::ChatML: return "chatml";
    case ChatFamily::Qwen2: return "qwen2";
    case ChatFamily::Qwen2_5: return "qwen2_5";
    case ChatFamily::Qwen3: return "qwen3";
    case ChatFamily::Llama3: return "llama3";
    case ChatFamily::Llama3_1: return "llama3_1";
    case ChatFamily::Jinja: return "jinja";
  }
  return "unknown";
}

bool chat_family_renders_tools(ChatFamily family) {
  return family == ChatFamily::Qwen2_5 || family == ChatFamily::Qwen3 || family == ChatFamily::Jinja;
}

bool chat_family_emits_bos(ChatFamily family) {
  // A Jinja template writes bos_token itself when the model wants it.
  return family == ChatFamily::Llama3 || family == ChatFamily::Llama3_1 || family == ChatFamily::Jinja;
}

std::string render_chat(ChatFamily family, const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  if (family == ChatFamily::Jinja)
    throw std::logic_error("render_chat(ChatFamily::Jinja) needs the tokenizer's template: use chat_prompt.h's overload");
  validate_messages(messages);
  // Dropping a field silently would train on a prompt the model never sees in use.
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::vector<std::string> extra = extra_message_fields(messages[i]);
    if (!extra.empty())
      throw ChatTemplateError("messages[" + std::to_string(i) + "] has " + extra.front() + ", which the built-in " +
                              chat_family_name(family) +
                              " format does not render; the model's own template may (--template jinja)");
  }
  if (!options.tools_json.empty() && !chat_family_renders_tools(family))
    tools_system_turn(family, nullptr, options.tools_json);  // throws: this template has no tools section
  std::string out;
  switch (family) {
    case ChatFamily::ChatML: out = render_plain_chatml(messages, {}); break;
    case ChatFamily::Qwen2: out = render_plain_chatml(messages, kQwen2System); break;
    case ChatFamily::Qwen2_5: out = render_qwen2_5(messages, options.tools_json); break;
    case ChatFamily::Qwen3: out = render_qwen3(messages, options.tools_json); break;
    case ChatFamily::Llama3: out = render_llama3(messages); break;
    case ChatFamily::Llama3_1: out = render_llama3_1(messages, options.date); break;
    case ChatFamily::Jinja: break;
  }
  if (options.add_generation_prompt) {
    if (family == ChatFamily::Llama3 || family == ChatFamily::Llama3_1) {
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    } else {
      out += "<|im_start|>assistant\n";
      if (family == ChatFamily::Qwen3 && !options.enable_thinking) out += "<think>\n\n</think>\n\n";
    }
  }
  return out;
}

}  // namespace grpo::tok
