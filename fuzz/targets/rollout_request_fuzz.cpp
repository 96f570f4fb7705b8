// A rollout server request body from any bytes, parsed as /generate/,
// /chat/ and /infer/ parse it: an engine job, or what the server answers
// with 422 (RequestError naming the field, a JSON error on `body`).
#include "fuzz_support.h"
#include "rollout/protocol.h"
#include "tokenizer/tokenizer.h"
#include "util/json_input.h"

namespace {

const grpo::rollout::PromptContext& context() {
  static const grpo::tok::Tokenizer tokenizer =
      grpo::tok::Tokenizer::from_file(GRPO_SOURCE_DIR "/tests/data/qwen3-tokenizer.json");
  static const grpo::rollout::PromptContext ctx = [] {
    grpo::rollout::PromptContext c;
    c.tokenizer = &tokenizer;
    c.chat_family = grpo::tok::ChatFamily::Qwen3;
    c.eos_ids = {151645};
    c.vocab_size = 151936;
    c.max_prompt_tokens = 4096;
    c.max_model_len = 4096;
    return c;
  }();
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body = grpo::fuzz::text_of(data + 1, size - 1);
  static grpo::rollout::SeedSource seeds;
  try {
    const nlohmann::json request = grpo::util::parse_json(body, "the request body");
    switch (data[0] % 3) {
      case 0: (void)grpo::rollout::parse_generate(request, context(), seeds); break;
      case 1: (void)grpo::rollout::parse_chat(request, context(), seeds); break;
      default: (void)grpo::rollout::parse_infer(request, context(), seeds); break;
    }
  } catch (const grpo::UserError&) {
  } catch (const grpo::rollout::RequestError&) {
  } catch (const nlohmann::json::type_error&) {
  }
  return 0;
}
