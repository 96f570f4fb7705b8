// Batched sampling with a KV cache. Each distinct prompt is prefilled once
// and its cache shared by its n copies; finished sequences leave the batch at
// once, so no compute goes to padding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/sampling.h"
#include "model/transformer.h"

namespace grpo::tok {
class Tokenizer;
}

namespace grpo::model {

struct GenerateRequest {
  std::vector<int32_t> prompt_ids;
  int64_t n = 1;                 // completions of this prompt
  uint64_t seed = 0;             // copy i samples with sequence_seed(seed, i)
  std::vector<int32_t> stop_ids; // e.g. eos; the stop id is kept as the last id
  int64_t max_new_tokens = -1;   // this request's budget when below params.max_new_tokens; -1: params'
};

enum class FinishReason { Stop, Length };

struct Completion {
  size_t request = 0;            // index into the requests
  int64_t index = 0;             // 0..n-1 within the request
  std::vector<int32_t> ids;      // generated ids
  std::vector<float> logprobs;   // per id, under softmax(logits / temperature)
  FinishReason finish = FinishReason::Length;
  // Per id, the params.top_logprobs most likely tokens and their logprobs
  // (empty when top_logprobs is 0): what a server's `logprobs: N` returns.
  std::vector<std::vector<int32_t>> top_ids;
  std::vector<std::vector<float>> top_logprobs;
};

class Engine {
 public:
  // `tokenizer` is needed only for stop strings; it must outlive the engine.
  explicit Engine(CausalLM model, const tok::Tokenizer* tokenizer = nullptr);

  // Completions in request order, copies in index order.
  std::vector<Completion> generate(const std::vector<GenerateRequest>& requests, const SamplingParams& params);

  CausalLM& model() { return model_; }

 private:
  CausalLM model_;
  const tok::Tokenizer* tokenizer_;
};

}  // namespace grpo::model
