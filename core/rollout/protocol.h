// The rollout protocol's generation bodies (TRL's /generate/ and /chat/,
// ms-swift's /infer/) turned into engine work, and engine completions turned
// back into the JSON those clients read. No HTTP here: the server routes
// bodies to these functions, the tests call them directly too.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/engine.h"
#include "tokenizer/chat_template.h"

namespace grpo::tok {
class Tokenizer;
}

namespace grpo::rollout {

// A body that does not fit the schema: answered with 422 and the field's
// path (e.g. "prompts[2]", "generation_kwargs.seed").
class RequestError : public std::runtime_error {
 public:
  RequestError(std::string field, const std::string& message)
      : std::runtime_error(field + ": " + message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// What every request is checked and encoded against.
struct PromptContext {
  const tok::Tokenizer* tokenizer = nullptr;
  std::optional<tok::ChatFamily> chat_family;  // none: the tokenizer has no chat template we render
  std::vector<int32_t> eos_ids;                // stop ids unless ignore_eos
  int64_t vocab_size = 0;
  int64_t max_prompt_tokens = 0;
  int64_t max_model_len = 0;  // positions of prompt and completion together (--max_model_len)
  int64_t max_n = 256;  // completions per prompt (--max_n): a bound on what one call may allocate
  int64_t max_sequences_per_call = 4096;  // prompts × n (--max_sequences_per_call)
};

// One HTTP call as the engine runs it: all its prompts share the sampling
// parameters, so it is one engine request per prompt.
struct GenerationJob {
  std::vector<model::GenerateRequest> requests;
  model::SamplingParams params;
  // -1: no logprobs (null); 0: the sampled token's; N: the N most likely plus the sampled one.
  int64_t logprobs = -1;
};

// Draws the seed of a request that names none (vLLM samples unseeded
// requests from its own generator). Thread-safe.
class SeedSource {
 public:
  uint64_t next();

 private:
  std::mutex mutex_;
  std::mt19937_64 rng_{std::random_device{}()};
};

// TRL's /generate/: `prompts` as strings or token-id lists.
GenerationJob parse_generate(const nlohmann::json& body, const PromptContext& ctx, SeedSource& seeds);
// TRL's /chat/: `messages`, one conversation per prompt.
GenerationJob parse_chat(const nlohmann::json& body, const PromptContext& ctx, SeedSource& seeds);
// ms-swift's /infer/: `infer_requests` and `request_config`.
GenerationJob parse_infer(const nlohmann::json& body, const PromptContext& ctx, SeedSource& seeds);

// {prompt_ids, completion_ids, logprobs, logprob_token_ids}: completions
// prompt-major, as the engine returns them.
nlohmann::json generate_response(const GenerationJob& job, const std::vector<model::Completion>& completions);

// A list of chat.completion objects, one per infer request, its n choices
// carrying the text, finish_reason and token_ids.
nlohmann::json infer_response(const GenerationJob& job, const std::vector<model::Completion>& completions,
                              const tok::Tokenizer& tokenizer, const std::string& model_name);

}  // namespace grpo::rollout
