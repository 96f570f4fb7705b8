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
// tokenizer_config.json carries `chat_template`, as a downloaded model has.
std::string model_dir(const std::string& name, const std::string& chat_template, const json& context) {
  const fs::path dir = fs::temp_directory_path() / ("grpo_model_template_" + name);
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

// The cases whose context is what the trainer passes: text messages, tools or none,
// add_generation_prompt, enable_thinking false, and special tokens.
bool trainer_context(const json& c) {
  static const std::set<std::string> keys = {"messages", "tools", "documents", "add_generation_prompt",
                                             "enable_thinking", "bos_token", "eos_token", "pad_token",
                                             "unk_token"};
  for (const auto& [k, v] : c.items())
    if (!keys.count(k)) return false;
  if (c.contains("documents") && !c["documents"].is_null()) return false;
  if (c.contains("enable_thinking") && c["enable_thinking"] != false) return false;
  if (c["messages"].empty()) return false;
  for (const auto& m : c["messages"])
    for (const auto& [k, v] : m.items())
      if ((k != "role" && k != "content") || (k == "content" && !v.is_string())) return false;
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
    const ChatFamily family = chat_family_for(tokenizer, "jinja");
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
    EXPECT_EQ(render_chat(tokenizer, family, messages_from_json(nlohmann::json::parse(c["context"]["messages"].dump())),
                          options),
              c["expected"].get<std::string>())
        << name << " / " << c["name"];
    families.insert(file);
    ++compared;
  }
  EXPECT_GE(compared, 150u);
  EXPECT_EQ(families.size(), 13u);  // every template file
}

TEST(ModelTemplate, AFamilyIsDetectedWhenOneFitsElseTheTemplateIsInterpreted) {
  const json qwen3 = read_json(kTemplates + "qwen3.json");
  const json mistral = read_json(kTemplates + "mistral_nemo.json");
  const json tokens = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  EXPECT_EQ(chat_family_for(Tokenizer::from_dir(model_dir("qwen3", qwen3["chat_template"], tokens)), ""), ChatFamily::Qwen3);
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
