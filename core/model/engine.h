// Batched sampling with a KV cache. Each distinct prompt is prefilled once
// and its cache shared by its n copies; finished sequences leave the batch at
// once, so no compute goes to padding.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "model/prefix_store.h"
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
  // When set (a server's client went away, the server stops), this request's
  // rows leave the batch before the next decode step, as finished rows do,
  // so the rest of the batch goes on and nothing more is spent on them.
  const std::atomic<bool>* cancelled = nullptr;
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

// What one call hands on to the next: multi-turn rollouts call the engine
// once per turn, and turn t + 1's prompt is turn t's prompt, its completion
// and what the conversation appended.
struct PrefixReuse {
  bool continues = false;  // the prompts may extend the previous call's completions, under the same weights
  bool keep = false;       // the next call may extend this call's completions: keep their keys and values
};

class Engine {
 public:
  // `tokenizer` is needed only for stop strings; it must outlive the engine.
  explicit Engine(CausalLM model, const tok::Tokenizer* tokenizer = nullptr);

  // Completions in request order, copies in index order. Without
  // reuse.continues nothing of an earlier call is used.
  std::vector<Completion> generate(const std::vector<GenerateRequest>& requests, const SamplingParams& params,
                                   PrefixReuse reuse = {});

  CausalLM& model() { return model_; }

  // The last call's distinct prompts: ids prefilled, and ids whose keys and
  // values came from the previous call's completions instead.
  int64_t prefilled_ids() const { return prefilled_ids_; }
  int64_t reused_ids() const { return reused_ids_; }

 private:
  void keep_for_next_call(const KvCache& cache, int64_t row, const std::vector<int32_t>& prompt,
                          const std::vector<int32_t>& sampled);
  CausalLM model_;
  const tok::Tokenizer* tokenizer_;
  PrefixStore kept_{int64_t{2} << 30};  // at most 2 GiB of keys and values
  int64_t prefilled_ids_ = 0, reused_ids_ = 0;
};

}  // namespace grpo::model
