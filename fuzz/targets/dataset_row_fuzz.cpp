// A dataset line from any bytes, through what the trainer does with it: the
// row, its prompt messages, and Qwen2.5's chat template (the Jinja engine)
// rendering them. Each step either works or throws a UserError.
#include <optional>

#include "data/dataset.h"
#include "data/file_rows.h"
#include "fuzz_support.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja/template.h"

namespace {

const grpo::tok::jinja::Template& qwen_template() {
  static const grpo::tok::jinja::Template t = [] {
    std::ifstream in(GRPO_SOURCE_DIR "/tests/data/chat_templates/qwen2_5.json");
    return grpo::tok::jinja::Template(nlohmann::json::parse(in).at("chat_template").get<std::string>());
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(grpo::fuzz::text_of(data, size));
  grpo::fuzz::expect_clean([&] {
    grpo::data::BadRows bad;
    for (const grpo::data::Row& row : grpo::data::read_jsonl_text("rows.jsonl", text, std::nullopt, bad)) {
      const nlohmann::json messages = grpo::data::prompt_messages(row, "system prompt");
      (void)grpo::tok::messages_from_json(messages);
      nlohmann::ordered_json context;
      context["messages"] = nlohmann::ordered_json::parse(messages.dump());
      context["add_generation_prompt"] = true;
      (void)qwen_template().render(context);
    }
  });
  return 0;
}
