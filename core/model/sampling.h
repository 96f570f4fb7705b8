// Choosing the next token from logits: repetition penalty, temperature,
// top-k, top-p, min-p, and a random stream of its own for every sequence.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <random>
#include <vector>

namespace grpo::model {

struct SamplingParams {
  double temperature = 1.0;         // > 0
  double top_p = 1.0;               // 1 = off
  int64_t top_k = 0;                // <= 0 = off; 1 = greedy
  double min_p = 0.0;               // 0 = off
  double repetition_penalty = 1.0;  // 1 = off (as in transformers: divide positive logits, multiply negative)
  int64_t max_new_tokens = 16;
  int64_t top_logprobs = 0;         // > 0: also report the most likely tokens at each step (for servers)
  std::vector<std::string> stop_strings;
};

// The seed of copy `index` of a request seeded `seed`: distinct for every
// copy, so the G completions of a prompt never coincide.
uint64_t sequence_seed(uint64_t seed, uint64_t index);

// The request seed under which copies 0.. are copies `first`.. of a request
// seeded `seed`: sequence_seed(seed_of_copies(seed, first), i) ==
// sequence_seed(seed, first + i). A group split over several processes thus
// samples exactly what one process sampling it whole would.
uint64_t seed_of_copies(uint64_t seed, uint64_t first);

struct Sampled {
  at::Tensor tokens;    // [B] int64
  at::Tensor logprobs;  // [B] float32: log p(token) under softmax(logits / temperature)
  at::Tensor top_ids;       // [B, k] int64, most likely first; only when params.top_logprobs > 0
  at::Tensor top_logprobs;  // [B, k] float32, the same distribution as logprobs
};

// logits: [B, V]; seen: [B, V] bool of tokens already in each sequence (for
// the repetition penalty; may be undefined when it is off); rngs: one per row,
// each giving the row one uniform draw.
Sampled sample_next(const at::Tensor& logits, const at::Tensor& seen, const SamplingParams& params,
                    std::vector<std::mt19937_64*>& rngs);

// The same with the rows' uniform draws given: draws [B] float32 in [0, 1).
// Off the CPU it runs on the logits' device only (no host read), so a
// decoding step that samples this way can be captured as a CUDA graph; the
// ids are those sample_next gives for the same draws.
Sampled sample_with_draws(const at::Tensor& logits, const at::Tensor& seen, const SamplingParams& params,
                          const at::Tensor& draws);

// One uniform draw from each rng, in row order.
std::vector<float> uniform_draws(std::vector<std::mt19937_64*>& rngs);

}  // namespace grpo::model
