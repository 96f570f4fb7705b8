// A chat template (Jinja source) from any bytes, parsed and rendered with a
// conversation: text, or a JinjaError naming the construct. Rendering is
// bounded, so no template can run forever or exhaust memory.
#include "fuzz_support.h"
#include "tokenizer/jinja/template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(grpo::fuzz::text_of(data, size));
  static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},
                 {"role": "assistant", "content": "4", "tool_calls": [{"type": "function",
                  "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]}],
    "tools": [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  grpo::fuzz::expect_clean([&] { (void)grpo::tok::jinja::Template(source).render(context); });
  return 0;
}
