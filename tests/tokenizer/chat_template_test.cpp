// Chat template tests. Every expected string below was written out by hand
// from the template's own logic: Qwen3's real template in
// tests/data/qwen3-tokenizer_config.json, and the published templates of
// Qwen2-Instruct, Qwen2.5-Instruct, Meta-Llama-3-Instruct and
// Llama-3.1-Instruct. Each was then checked against an independent oracle:
// those templates rendered by Python's jinja2 3.1.6 configured as
// transformers' apply_chat_template configures it (sandboxed environment,
// trim_blocks, lstrip_blocks, its tojson filter), with tools=None.
#include "tokenizer/chat_template.h"
#include "tokenizer/chat_prompt.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using grpo::tok::ChatFamily;
using grpo::tok::ChatMessage;
using grpo::tok::ChatOptions;
using grpo::tok::ChatTemplateError;
using grpo::tok::chat_family_emits_bos;
using grpo::tok::chat_family_name;
using grpo::tok::detect_chat_family;
using grpo::tok::messages_from_json;
using grpo::tok::parse_chat_family;
using grpo::tok::render_chat;
using nlohmann::json;

namespace {

// The system prompt's trailing newline and the last question's leading
// spaces show which families trim (Llama) and which keep content verbatim.
const std::vector<ChatMessage> kWithSystem = {
    {"system", "Be brief.\n"},
    {"user", "What is 2+2?"},
    {"assistant", "<think>\nAdd them.\n</think>\n\nIt is 4."},
    {"user", "  And 3+3?"},
};
const std::vector<ChatMessage> kNoSystem(kWithSystem.begin() + 1, kWithSystem.end());

ChatOptions no_generation_prompt() {
  ChatOptions options;
  options.add_generation_prompt = false;
  return options;
}

struct FamilyCase {
  ChatFamily family;
  std::string with_system_and_prompt;
  std::string no_system_no_prompt;
  std::string generation_prompt;
};

const std::string kImHistory =  // user, assistant, user as plain ChatML turns
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
    "<|im_start|>assistant\n<think>\nAdd them.\n</think>\n\nIt is 4.<|im_end|>\n"
    "<|im_start|>user\n  And 3+3?<|im_end|>\n";
const std::string kLlamaHistory =
    "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n<think>\nAdd them.\n</think>\n\nIt is 4.<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\nAnd 3+3?<|eot_id|>";
const std::string kLlamaPrompt = "<|start_header_id|>assistant<|end_header_id|>\n\n";
const std::string kLlama31System =
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
    "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";

const std::vector<FamilyCase> kFamilies = {
    {ChatFamily::ChatML,
     "<|im_start|>system\nBe brief.\n<|im_end|>\n" + kImHistory + "<|im_start|>assistant\n",
     kImHistory, "<|im_start|>assistant\n"},
    {ChatFamily::Qwen2,
     "<|im_start|>system\nBe brief.\n<|im_end|>\n" + kImHistory + "<|im_start|>assistant\n",
     "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n" + kImHistory, "<|im_start|>assistant\n"},
    {ChatFamily::Qwen2_5,
     "<|im_start|>system\nBe brief.\n<|im_end|>\n" + kImHistory + "<|im_start|>assistant\n",
     "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n" +
         kImHistory,
     "<|im_start|>assistant\n"},
    // Qwen3 drops the reasoning of an assistant turn before the last query.
    {ChatFamily::Qwen3,
     "<|im_start|>system\nBe brief.\n<|im_end|>\n"
     "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
     "<|im_start|>assistant\nIt is 4.<|im_end|>\n"
     "<|im_start|>user\n  And 3+3?<|im_end|>\n"
     "<|im_start|>assistant\n",
     "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
     "<|im_start|>assistant\nIt is 4.<|im_end|>\n"
     "<|im_start|>user\n  And 3+3?<|im_end|>\n",
     "<|im_start|>assistant\n"},
    {ChatFamily::Llama3,
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>" + kLlamaHistory +
         kLlamaPrompt,
     "<|begin_of_text|>" + kLlamaHistory, kLlamaPrompt},
    {ChatFamily::Llama3_1, kLlama31System + "Be brief.<|eot_id|>" + kLlamaHistory + kLlamaPrompt,
     kLlama31System + "<|eot_id|>" + kLlamaHistory, kLlamaPrompt},
};

TEST(ChatTemplate, RendersEachFamilyWithAndWithoutGenerationPrompt) {
  for (const FamilyCase& c : kFamilies) {
    SCOPED_TRACE(chat_family_name(c.family));
    EXPECT_EQ(render_chat(c.family, kWithSystem), c.with_system_and_prompt);
    EXPECT_EQ(render_chat(c.family, kNoSystem, no_generation_prompt()), c.no_system_no_prompt);
    // The generation prompt is a pure suffix in every family.
    EXPECT_EQ(render_chat(c.family, kNoSystem), c.no_system_no_prompt + c.generation_prompt);
    EXPECT_EQ(render_chat(c.family, kWithSystem, no_generation_prompt()) + c.generation_prompt,
              c.with_system_and_prompt);
  }
}

TEST(ChatTemplate, Qwen3ThinkingSwitchOnlyChangesTheGenerationPrompt) {
  ChatOptions off;
  off.enable_thinking = false;
  EXPECT_EQ(render_chat(ChatFamily::Qwen3, {{"user", "Hi"}}, off),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  off.add_generation_prompt = false;
  EXPECT_EQ(render_chat(ChatFamily::Qwen3, {{"user", "Hi"}}, off), "<|im_start|>user\nHi<|im_end|>\n");
  // Other families ignore it.
  EXPECT_EQ(render_chat(ChatFamily::Qwen2_5, {{"system", "S"}, {"user", "Hi"}}, ChatOptions{true, false}),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, Qwen3KeepsReasoningOnlyAfterTheLastQuery) {
  const std::vector<ChatMessage> messages = {
      {"user", "Q1"},
      {"assistant", "<think>\nr1\n</think>\n\nA1"},
      {"user", "Q2"},
      {"assistant", "<think>\n\nr2\n\n</think>\n\n\nA2"},
  };
  EXPECT_EQ(render_chat(ChatFamily::Qwen3, messages, no_generation_prompt()),
            "<|im_start|>user\nQ1<|im_end|>\n"
            "<|im_start|>assistant\nA1<|im_end|>\n"
            "<|im_start|>user\nQ2<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nr2\n</think>\n\nA2<|im_end|>\n");
  // A final answer without reasoning still gets an empty think block.
  EXPECT_EQ(render_chat(ChatFamily::Qwen3, {{"user", "Q"}, {"assistant", "\nA"}}, no_generation_prompt()),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nA<|im_end|>\n");
  // split('</think>')[-1] / split('</think>')[0].split('<think>')[-1]
  EXPECT_EQ(render_chat(ChatFamily::Qwen3, {{"assistant", "a<think>b</think>c</think>\nd"}, {"user", "Q"}},
                        no_generation_prompt()),
            "<|im_start|>assistant\nd<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n");
}

TEST(ChatTemplate, Qwen3ToolTurnsAndToolResponsesAreNotQueries) {
  // After the last query an intermediate turn keeps its reasoning; tool
  // results become one user turn per run of tool messages.
  EXPECT_EQ(render_chat(ChatFamily::Qwen3,
                        {{"user", "Q"},
                         {"assistant", "<think>\nplan\n</think>\n\ncalling"},
                         {"tool", "42"},
                         {"tool", "43"},
                         {"assistant", "done"}},
                        no_generation_prompt()),
            "<|im_start|>user\nQ<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nplan\n</think>\n\ncalling<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n42\n</tool_response>\n<tool_response>\n43\n</tool_response>"
            "<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\ndone<|im_end|>\n");
  // A user turn that only wraps a tool response does not move the last query.
  EXPECT_EQ(render_chat(ChatFamily::Qwen3,
                        {{"user", "Q"},
                         {"assistant", "<think>p</think>x"},
                         {"user", "<tool_response>r</tool_response>"}}),
            "<|im_start|>user\nQ<|im_end|>\n"
            "<|im_start|>assistant\n<think>\np\n</think>\n\nx<|im_end|>\n"
            "<|im_start|>user\n<tool_response>r</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, ToolAndLateSystemMessagesFollowEachTemplate) {
  const std::vector<ChatMessage> messages = {{"user", "Hi"}, {"system", "Late."}, {"tool", "{\"t\": 1}\n"}};
  const ChatOptions none = no_generation_prompt();
  EXPECT_EQ(render_chat(ChatFamily::Qwen2, messages, none),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>system\nLate.<|im_end|>\n<|im_start|>tool\n{\"t\": 1}\n<|im_end|>\n");
  EXPECT_EQ(render_chat(ChatFamily::Qwen2_5, messages, none),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>system\nLate.<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n{\"t\": 1}\n\n</tool_response><|im_end|>\n");
  EXPECT_EQ(render_chat(ChatFamily::Llama3, messages, none),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>system<|end_header_id|>\n\nLate.<|eot_id|>"
            "<|start_header_id|>tool<|end_header_id|>\n\n{\"t\": 1}<|eot_id|>");
  // Llama 3.1 passes tool output through tojson (a string is iterable to
  // Jinja), so it arrives quoted and escaped, and untrimmed.
  EXPECT_EQ(render_chat(ChatFamily::Llama3_1, messages, none),
            kLlama31System + "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                             "<|start_header_id|>system<|end_header_id|>\n\nLate.<|eot_id|>"
                             "<|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"t\\\": 1}\\n\"<|eot_id|>");
}

TEST(ChatTemplate, LlamaTrimsUnicodeWhitespaceAndTakesTheDate) {
  // Jinja's trim is Python's str.strip(): NBSP, ideographic space and
  // U+001C count as whitespace; a zero-width space (U+200B) does not.
  ChatOptions options;
  options.date = "01 Jan 2025";
  EXPECT_EQ(render_chat(ChatFamily::Llama3_1,
                        {{"system", "\xc2\xa0 S \xe3\x80\x80"}, {"user", "\x1c\tHi\xe2\x80\x8b\n"}}, options),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 01 Jan 2025\n\nS<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi\xe2\x80\x8b<|eot_id|>" +
                kLlamaPrompt);
  EXPECT_EQ(render_chat(ChatFamily::Llama3, {{"user", " \n "}}, no_generation_prompt()),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n<|eot_id|>");
  // Bytes that are not UTF-8 are kept, never taken for whitespace.
  EXPECT_EQ(render_chat(ChatFamily::Llama3, {{"user", " a\xe2\x80 "}}, no_generation_prompt()),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\na\xe2\x80<|eot_id|>");
}

TEST(ChatTemplate, OnlyLlamaRendersTheBosToken) {
  for (const FamilyCase& c : kFamilies) {
    const bool has_bos = render_chat(c.family, kNoSystem).rfind("<|begin_of_text|>", 0) == 0;
    EXPECT_EQ(chat_family_emits_bos(c.family), has_bos) << chat_family_name(c.family);
  }
}

TEST(ChatTemplate, RejectsEmptyChatsAndUnknownRoles) {
  EXPECT_THROW(render_chat(ChatFamily::Qwen3, {}), ChatTemplateError);
  try {
    render_chat(ChatFamily::Llama3_1, {{"user", "Hi"}, {"bot", "Hello"}});
    FAIL() << "an unknown role was rendered";
  } catch (const ChatTemplateError& e) {
    EXPECT_NE(std::string(e.what()).find("message 1: role \"bot\""), std::string::npos) << e.what();
  }
}

// --- detection ---------------------------------------------------------------

std::string qwen3_template() {
  std::ifstream in(std::string(GRPO_TEST_DATA_DIR) + "/qwen3-tokenizer_config.json");
  return json::parse(in).at("chat_template").get<std::string>();
}

// Snippets of the published templates, as the decoded JSON string holds
// them: the Jinja string literals keep their \n escapes.
const char* const kQwen2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
const char* const kQwen2_5Template =
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "{%- else %}\n"
    "    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
    "assistant.<|im_end|>\\n' }}\n"
    "{%- endif %}\n";
const char* const kChatMLTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
const char* const kLlama3Template =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
const char* const kLlama3_1Template =
    "{{- bos_token }}\n{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul 2024\" %}\n"
    "{%- endif %}\n{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
    "{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n";

TEST(ChatTemplateDetect, KnowsTheSupportedFamilies) {
  EXPECT_EQ(detect_chat_family(qwen3_template()), ChatFamily::Qwen3);
  EXPECT_EQ(detect_chat_family(kQwen2Template), ChatFamily::Qwen2);
  EXPECT_EQ(detect_chat_family(kQwen2_5Template), ChatFamily::Qwen2_5);
  EXPECT_EQ(detect_chat_family(kChatMLTemplate), ChatFamily::ChatML);
  EXPECT_EQ(detect_chat_family(kLlama3Template), ChatFamily::Llama3);
  EXPECT_EQ(detect_chat_family(kLlama3_1Template), ChatFamily::Llama3_1);
}

TEST(ChatTemplateDetect, RefusesTemplatesItCannotRenderFaithfully) {
  const std::vector<std::string> unknown = {
      "",
      // Gemma
      "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\\n' }}{% endfor %}",
      // Qwen2.5-Math's default system prompt
      "{{- '<|im_start|>system\\nPlease reason step by step, and put your final answer within \\\\boxed{}."
      "<|im_end|>\\n' }}",
      // QwQ: opens <think> in the generation prompt
      std::string(kChatMLTemplate) + "{{- '<|im_start|>assistant\\n<think>\\n' }}",
      // ChatML after a Llama bos (Hermes 3)
      std::string("{{bos_token}}") + kQwen2Template,
      // Llama headers without a bos token
      "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}",
  };
  for (const std::string& text : unknown) {
    try {
      detect_chat_family(text);
      ADD_FAILURE() << "detected a family for: " << text;
    } catch (const ChatTemplateError& e) {
      EXPECT_NE(std::string(e.what()).find("--template chatml|qwen2|qwen2_5|qwen3|llama3|llama3_1"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(ChatTemplateDetect, ParsesTemplateNames) {
  for (const FamilyCase& c : kFamilies) EXPECT_EQ(parse_chat_family(chat_family_name(c.family)), c.family);
  EXPECT_EQ(parse_chat_family("qwen2.5"), ChatFamily::Qwen2_5);
  EXPECT_EQ(parse_chat_family("llama3.2"), ChatFamily::Llama3_1);
  EXPECT_EQ(parse_chat_family("llama3_3"), ChatFamily::Llama3_1);
  try {
    parse_chat_family("gemma");
    FAIL() << "gemma parsed";
  } catch (const ChatTemplateError& e) {
    EXPECT_NE(std::string(e.what()).find("chatml|qwen2|qwen2_5|qwen3|llama3|llama3_1"), std::string::npos);
  }
}

// --- messages from a dataset row ---------------------------------------------

TEST(ChatMessagesFromJson, ReadsStringAndTextPartContent) {
  const json row = json::parse(R"([
    {"role": "system", "content": "S"},
    {"role": "user", "content": [{"type": "text", "text": "Hello, "}, {"type": "text", "text": "world"}]},
    {"role": "assistant", "content": "Hi", "tool_calls": null}
  ])");
  const std::vector<ChatMessage> messages = messages_from_json(row);
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_EQ(messages[1].role, "user");
  EXPECT_EQ(messages[1].content, "Hello, world");
  EXPECT_EQ(render_chat(ChatFamily::ChatML, messages, no_generation_prompt()),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHello, world<|im_end|>\n"
            "<|im_start|>assistant\nHi<|im_end|>\n");
}

TEST(ChatMessagesFromJson, NamesTheBadEntry) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"role": "user", "content": "x"})", "list"},
      {R"([{"role": "user", "content": "x"}, "hi"])", "messages[1]"},
      {R"([{"content": "x"}])", "messages[0].role"},
      {R"([{"role": "user", "content": "x"}, {"role": "narrator", "content": "y"}])", "messages[1].role \"narrator\""},
      {R"([{"role": "user", "content": 3}])", "messages[0].content"},
      {R"([{"role": "user"}])", "messages[0].content"},
      {R"([{"role": "assistant", "content": null}])", "messages[0].content"},
      {R"([{"role": "user", "content": [{"type": "image", "image": "a.png"}]}])", "messages[0].content[0]"},
      {R"([{"role": "user", "content": [{"type": "text"}]}])", "messages[0].content[0].text"},
  };
  for (const auto& [text, expected] : cases) {
    try {
      messages_from_json(json::parse(text));
      ADD_FAILURE() << "accepted " << text;
    } catch (const ChatTemplateError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

// Every field reaches a Jinja template (chat_prompt.h); a built-in format that
// would drop one refuses instead, naming the way out.
TEST(ChatMessagesFromJson, KeepsEveryFieldAndBuiltInFormatsRefuseWhatTheyCannotRender) {
  const json row = json::parse(R"([
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": {}}}]},
    {"role": "tool", "content": "21", "tool_call_id": "c1"}
  ])");
  const std::vector<ChatMessage> messages = messages_from_json(row);
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_EQ(extra_message_fields(messages[1]), std::vector<std::string>{"tool_calls"});
  EXPECT_EQ(extra_message_fields(messages[2]), std::vector<std::string>{"tool_call_id"});
  try {
    render_chat(ChatFamily::ChatML, messages, no_generation_prompt());
    ADD_FAILURE() << "the tool call was dropped";
  } catch (const ChatTemplateError& e) {
    EXPECT_NE(std::string(e.what()).find("messages[1] has tool_calls"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--template jinja"), std::string::npos) << e.what();
  }
}

}  // namespace

// ---- tools (transformers' apply_chat_template(..., tools=)) ----
// Expected text rendered by jinja2 3.1.6 from tests/data/qwen3-tokenizer_config.json's template
// with tools=[the schema below] (transformers' environment and tojson); Qwen2.5's template has the
// same tools section after its own (default) system prompt.

namespace {

const std::string kToolsJson =
    R"([{"type": "function", "function": {"name": "calculator", "description": "Evaluate é", )"
    R"("parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": )"
    R"(["expression"], "x": 1.5}}}])";
const std::string kToolsSection =
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"calculator\", \"description\": \"Evaluate é\", \"parameters\": {\"type\": \"object\", \"properties\": {\"expression\": {\"type\": \"string\"}}, \"required\": [\"expression\"], \"x\": 1.5}}}\n"
    "</tools>\n"
    "\n"
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
    "</tool_call><|im_end|>\n"
    "";
const std::string kToolHistory =
    "<|im_start|>user\n"
    "What is 2*3?<|im_end|>\n"
    "<|im_start|>assistant\n"
    "<tool_call>\n"
    "{}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "<tool_response>\n"
    "6\n"
    "</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n"
    "";
const std::vector<ChatMessage> kToolChat = {{"system", "Be brief."},
                                            {"user", "What is 2*3?"},
                                            {"assistant", "<tool_call>\n{}\n</tool_call>"},
                                            {"tool", "6"}};

ChatOptions with_tools() {
  ChatOptions o;
  o.tools_json = kToolsJson;
  return o;
}

}  // namespace

TEST(ChatTemplateTools, Qwen3DescribesToolsInTheSystemTurn) {
  EXPECT_EQ(render_chat(ChatFamily::Qwen3, kToolChat, with_tools()),
            "<|im_start|>system\nBe brief.\n\n" + kToolsSection + kToolHistory);
  const std::vector<ChatMessage> no_system(kToolChat.begin() + 1, kToolChat.end());
  EXPECT_EQ(render_chat(ChatFamily::Qwen3, no_system, with_tools()), "<|im_start|>system\n" + kToolsSection + kToolHistory);
}

TEST(ChatTemplateTools, Qwen2_5KeepsItsDefaultSystemPromptBeforeTheTools) {
  EXPECT_EQ(render_chat(ChatFamily::Qwen2_5, kToolChat, with_tools()),
            "<|im_start|>system\nBe brief.\n\n" + kToolsSection + kToolHistory);
  const std::vector<ChatMessage> no_system(kToolChat.begin() + 1, kToolChat.end());
  EXPECT_EQ(render_chat(ChatFamily::Qwen2_5, no_system, with_tools()),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n" +
                kToolsSection + kToolHistory);
}

TEST(ChatTemplateTools, TemplatesWithoutAToolsSectionRefuseTools) {
  for (ChatFamily f : {ChatFamily::ChatML, ChatFamily::Qwen2, ChatFamily::Llama3, ChatFamily::Llama3_1}) {
    try {
      render_chat(f, kToolChat, with_tools());
      ADD_FAILURE() << chat_family_name(f) << " rendered tools";
    } catch (const ChatTemplateError& e) {
      // Only formats that describe tools are named: "qwen2" alone would be a second refusal.
      EXPECT_NE(std::string(e.what()).find("--template qwen2_5 or qwen3,"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("--template jinja"), std::string::npos) << e.what();
    }
  }
  ChatOptions bad;
  bad.tools_json = "{\"not\": \"a list\"}";
  EXPECT_THROW(render_chat(ChatFamily::Qwen3, kToolChat, bad), ChatTemplateError);
}

TEST(ChatTemplateTools, AContinuationIsWhatFollowsTheAssistantTurn) {
  const auto tokenizer = grpo::tok::Tokenizer::from_file(GRPO_TEST_DATA_DIR "/qwen3-tokenizer.json");
  // A tool result after a turn the policy closed with <|im_end|>: the rest of the closing, the
  // tool turn, the generation prompt.
  EXPECT_EQ(grpo::tok::render_continuation(tokenizer, ChatFamily::Qwen3, {{"tool", "6"}}, "<|im_end|>"),
            "\n<|im_start|>user\n<tool_response>\n6\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
  // A turn ended by a stop string keeps the whole closing.
  EXPECT_EQ(grpo::tok::render_continuation(tokenizer, ChatFamily::ChatML, {{"user", "Sure?"}}, "</tool_call>"),
            "<|im_end|>\n<|im_start|>user\nSure?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(grpo::tok::render_continuation(tokenizer, ChatFamily::Llama3_1, {{"user", "Sure?"}}, "<|eot_id|>"),
            "<|start_header_id|>user<|end_header_id|>\n\nSure?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}
