// A model whose chat template no native family renders: its own Jinja
// template, given what transformers' apply_chat_template gives it, renders as
// Python's jinja2 rendered it (tests/data/chat_templates/renders.json).
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/chat_prompt.h"

namespace {

namespace fs = std::filesystem;
using namespace grpo::tok;
// Ordered, as Python's json module reads objects: tool schemas render in their written order.
using json = nlohmann::ordered_json;

const std::string kTemplates = GRPO_TEST_DATA_DIR "/chat_templates/";

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// A model directory whose tokenizer has the case's special tokens and whose
// tokenizer_config.json carries `chat_template`, as a downloaded model has;
// one per test, since ctest runs them in parallel and two may use one name.
std::string model_dir(const std::string& name, const std::string& chat_template, const json& context) {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const fs::path dir = fs::temp_directory_path() / ("grpo_model_template_" + test + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_byte_level_tokenizer(dir.string());
  json tokenizer = read_json((dir / "tokenizer.json").string());
  json config = read_json((dir / "tokenizer_config.json").string());
  int next = 0;
  for (const auto& t : tokenizer["added_tokens"]) next = std::max(next, t["id"].get<int>() + 1);
  for (const char* key : {"bos_token", "eos_token", "pad_token", "unk_token"}) {
    if (!context.contains(key)) {
      config.erase(key);
      continue;
    }
    const std::string text = context[key];
    bool known = false;
    for (const auto& t : tokenizer["added_tokens"]) known |= t["content"] == text;
    if (!known)
      tokenizer["added_tokens"].push_back({{"id", next++}, {"content", text}, {"single_word", false}, {"lstrip", false},
                                           {"rstrip", false}, {"normalized", false}, {"special", true}});
    config[key] = text;
  }
  config["chat_template"] = chat_template;
  std::ofstream(dir / "tokenizer.json") << tokenizer.dump();
  std::ofstream(dir / "tokenizer_config.json") << config.dump();
  return dir.string();
}

// The cases whose context is what the trainer passes: text messages (with any
// other fields: tool_calls, tool_call_id, name, reasoning_content), tools or
// none, add_generation_prompt, enable_thinking false, and special tokens.
bool trainer_context(const json& c) {
  static const std::set<std::string> keys = {"messages", "tools", "documents", "add_generation_prompt",
                                             "enable_thinking", "bos_token", "eos_token", "pad_token",
                                             "unk_token"};
  for (const auto& [k, v] : c.items())
    if (!keys.count(k)) return false;
  if (c.contains("documents") && !c["documents"].is_null()) return false;
  if (c.contains("enable_thinking") && c["enable_thinking"] != false) return false;
  if (c["messages"].empty()) return false;
  for (const auto& m : c["messages"]) {
    const bool calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
    if (!m.contains("content") ? !calls : !(m["content"].is_string() || (calls && m["content"].is_null()))) return false;
  }
  return true;
}

TEST(ModelTemplate, UnknownTemplatesRenderThroughTheEngineAsTransformersRendersThem) {
  const json renders = read_json(kTemplates + "renders.json");
  std::set<std::string> families;
  size_t compared = 0;
  for (const auto& c : renders["cases"]) {
    if (!trainer_context(c["context"]) || !c.contains("expected")) continue;
    const std::string name = c["template"];
    const std::string file = name.substr(0, name.find('/'));
    const json source = read_json(kTemplates + file + ".json");
    const json& templ = source["chat_template"];
    std::string text;
    if (templ.is_string()) {
      text = templ;
    } else {  // named templates: the case names which
      for (const auto& t : templ)
        if (t["name"] == name.substr(name.find('/') + 1)) text = t["template"];
    }
    ASSERT_FALSE(text.empty()) << name;
    const Tokenizer tokenizer = Tokenizer::from_dir(model_dir(file, text, c["context"]));
    // The template itself, and what a run picks: a built-in format proven to
    // match hands tool calls and tools it lacks over to the template.
    for (const std::string flag : {"jinja", ""}) {
    const ChatFamily family = chat_family_for(tokenizer, flag);
    ChatOptions options;
    options.add_generation_prompt = c["context"]["add_generation_prompt"];
    options.enable_thinking = !c["context"].contains("enable_thinking");
    options.now = [&] {  // the reference renders' fixed clock
      std::tm t{};
      std::istringstream(renders["now"].get<std::string>()) >> std::get_time(&t, "%Y-%m-%dT%H:%M:%S");
      return t;
    };
    // The schemas in their written order (transformers keeps Python's dict order).
    if (c["context"].contains("tools") && !c["context"]["tools"].is_null()) options.tools_json = c["context"]["tools"].dump();
    EXPECT_EQ(render_chat(tokenizer, family, messages_from_json(c["context"]["messages"]),
                          options),
              c["expected"].get<std::string>())
        << name << " / " << c["name"] << " / " << chat_family_name(family);
    }
    families.insert(file);
    ++compared;
  }
  EXPECT_GE(compared, 200u);
  EXPECT_EQ(families.size(), 13u);  // every template file
}

TEST(ModelTemplate, AFamilyIsDetectedWhenOneFitsElseTheTemplateIsInterpreted) {
  const json qwen3 = read_json(kTemplates + "qwen3.json");
  const json mistral = read_json(kTemplates + "mistral_nemo.json");
  const json tokens = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  EXPECT_EQ(chat_family_for(Tokenizer::from_dir(model_dir("qwen3", qwen3["chat_template"], tokens)), ""), ChatFamily::Qwen3);
  const fs::path chatml = fs::temp_directory_path() / "grpo_model_template_chatml";
  fs::create_directories(chatml);
  write_byte_level_tokenizer(chatml.string());  // its template is plain ChatML, proven so by the probes
  EXPECT_EQ(chat_family_for(Tokenizer::from_dir(chatml.string()), ""), ChatFamily::ChatML);
  const Tokenizer m = Tokenizer::from_dir(model_dir("mistral", mistral["chat_template"], tokens));
  EXPECT_EQ(chat_family_for(m, ""), ChatFamily::Jinja);
  EXPECT_EQ(chat_family_for(m, "chatml"), ChatFamily::ChatML);  // --template still picks a native one
  // The rendered text carries its own special tokens: encoding adds none.
  const auto ids = encode_chat_prompt(m, ChatFamily::Jinja, {{"user", "Hi"}});
  EXPECT_EQ(ids.front(), m.token_to_id("<s>"));
  EXPECT_EQ(m.decode(ids), "<s>[INST]Hi[/INST]");
  // A multi-turn continuation: what the template writes after an assistant turn.
  EXPECT_EQ(render_continuation(m, ChatFamily::Jinja, {{"user", "More?"}}, "</s>"), "[INST]More?[/INST]");
}

// A built-in format replaces the model's template only where it writes the
// same bytes: Phi-4's ChatML with <|im_sep|> looks like ChatML and is not; a
// function-calling template with Llama headers and a bos token is not Llama 3.
TEST(ModelTemplate, ABuiltInFormatReplacesATemplateOnlyWhenItWritesTheSameBytes) {
  const std::string phi4 =
      "{% for message in messages %}{% if (message['role'] == 'system') %}"
      "{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}"
      "{% elif (message['role'] == 'user') %}{{'<|im_start|>user<|im_sep|>' + message['content'] + '<|im_end|>'}}"
      "{% elif (message['role'] == 'assistant') %}"
      "{{'<|im_start|>assistant<|im_sep|>' + message['content'] + '<|im_end|>'}}{% endif %}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant<|im_sep|>' }}{% endif %}";
  const json tokens = {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|im_end|>"}};
  const Tokenizer p = Tokenizer::from_dir(model_dir("phi4", phi4, tokens));
  ASSERT_EQ(detect_chat_family(phi4), ChatFamily::ChatML);  // what it looks like
  EXPECT_EQ(chat_family_for(p, ""), ChatFamily::Jinja);
  EXPECT_EQ(render_chat(p, chat_family_for(p, ""), {{"user", "Hi"}}),
            "<|im_start|>user<|im_sep|>Hi<|im_end|><|im_start|>assistant<|im_sep|>");

  const std::string functions =
      "{{ bos_token }}{% if tools %}<|start_header_id|>system<|end_header_id|>\n\nFunctions: {{ tools|tojson }}"
      "<|eot_id|>{% endif %}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' + "
      "m['content'] + '<|eot_id|>' }}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
  ASSERT_EQ(detect_chat_family(functions), ChatFamily::Llama3);
  const Tokenizer f = Tokenizer::from_dir(model_dir("functions", functions, tokens));
  EXPECT_EQ(chat_family_for(f, ""), ChatFamily::Jinja);  // it keeps the content's spaces, Llama 3 trims them
  ChatOptions tools;
  tools.tools_json = R"([{"name": "f"}])";
  EXPECT_EQ(render_chat(f, chat_family_for(f, ""), {{"user", " Hi "}}, tools),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nFunctions: [{\"name\": \"f\"}]<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n Hi <|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

// The built-in Llama 3.1 format has no tools section; the template has one, and
// being proven identical on plain text, it renders what the format cannot.
TEST(ModelTemplate, AProvenBuiltInFormatHandsToolsAndToolCallsToTheTemplate) {
  const json llama = read_json(kTemplates + "llama3_2.json");  // the 3.1 template, dated by strftime_now
  const json tokens = {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}};
  const Tokenizer t = Tokenizer::from_dir(model_dir("llama3_2", llama["chat_template"], tokens));
  ASSERT_EQ(chat_family_for(t, ""), ChatFamily::Llama3_1);
  ChatOptions tools;
  tools.tools_json = R"([{"type": "function", "function": {"name": "f", "parameters": {}}}])";
  const auto call = messages_from_json(json::parse(
      R"([{"role": "user", "content": "Go"}, {"role": "assistant", "content": null,
          "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]}])"));
  EXPECT_EQ(render_chat(t, ChatFamily::Llama3_1, call, tools), render_chat(t, ChatFamily::Jinja, call, tools));
  EXPECT_NE(render_chat(t, ChatFamily::Llama3_1, call, tools).find("\"name\": \"f\""), std::string::npos);
}

// Every field of a message reaches the template, in its written order, as
// transformers passes it: a multi-turn tool history keeps its calls.
TEST(ModelTemplate, EveryMessageFieldReachesTheTemplate) {
  const Tokenizer t = Tokenizer::from_dir(model_dir(
      "fields", "{% for m in messages %}{{ m.role }}:{{ m|tojson }};{% endfor %}", json::object()));
  const auto messages = messages_from_json(json::parse(
      R"([{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "function": {"name": "f"}}],
           "reasoning_content": "r"},
          {"role": "tool", "content": "6", "tool_call_id": "c1", "name": "f"}])"));
  EXPECT_EQ(render_chat(t, ChatFamily::Jinja, messages, {}),
            "assistant:{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c1\", \"function\": "
            "{\"name\": \"f\"}}], \"reasoning_content\": \"r\"};tool:{\"role\": \"tool\", \"content\": \"6\", "
            "\"tool_call_id\": \"c1\", \"name\": \"f\"};");
}

// Tools given to a template that never reads `tools` are an error, not dropped.
TEST(ModelTemplate, ToolsForATemplateWithoutThemNameAFormatThatHasThem) {
  const Tokenizer t = Tokenizer::from_dir(model_dir(
      "no_tools", "{% for m in messages %}[{{ m.content }}]{% endfor %}", json::object()));
  ChatOptions tools;
  tools.tools_json = R"([{"name": "f"}])";
  try {
    render_chat(t, ChatFamily::Jinja, {{"user", "Hi"}}, tools);
    ADD_FAILURE() << "the tools were dropped";
  } catch (const ChatTemplateError& e) {
    EXPECT_NE(std::string(e.what()).find("--template qwen2_5 or qwen3"), std::string::npos) << e.what();
  }
}

TEST(ModelTemplate, ATemplateTheEngineCannotReadIsAnErrorNamingTheConstruct) {
  const Tokenizer t = Tokenizer::from_dir(model_dir("bad", "{% for m in messages %}{{ m.content | wordwrap(5) }}"
                                                           "{% endfor %}{% include 'x' %}", json::object()));
  try {
    chat_family_for(t, "");
    ADD_FAILURE() << "no error";
  } catch (const ChatTemplateError& e) {
    EXPECT_NE(std::string(e.what()).find("include"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--template"), std::string::npos) << e.what();
  }
}

}  // namespace
