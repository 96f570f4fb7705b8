// Sampled completions laid out as training tensors: prompts left-padded,
// completions right-padded, and the mask of tokens that carry loss.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "model/logprobs.h"
#include "model/transformer.h"
#include "plugins/sample.h"

namespace grpo::trainer {

struct RolloutSequence {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> completion_ids;  // exactly what the sampler produced: never re-tokenized
  bool truncated = false;               // ended by length, not by a stop token
};

struct RolloutBatch {
  at::Tensor input_ids;        // [N, P + T] prompt (left-padded) then completion (right-padded)
  at::Tensor attention_mask;   // [N, P + T] 1 on real tokens
  at::Tensor completion_ids;   // [N, T]
  at::Tensor completion_mask;  // [N, T] float: 1 on completion tokens that carry loss
  at::Tensor truncated;        // [N] bool
  int64_t prompt_length = 0;   // P
  int64_t pad_id = 0;
};

// overlong_filter: truncated rows carry no loss (their mask is all 0) but stay
// in the batch for reward and advantage statistics (grpo.md §5).
RolloutBatch make_rollout_batch(const std::vector<RolloutSequence>& sequences, int64_t pad_id, bool overlong_filter,
                                at::Device device = at::kCPU);
// Samples [begin, begin + count) of a generation batch, laid out the same
// way; a sample's tokens carry loss as Sample::carries_loss says.
RolloutBatch make_rollout_batch(const std::vector<Sample>& samples, size_t begin, size_t count, int64_t pad_id,
                                bool overlong_filter, at::Device device = at::kCPU);

// The policy's log-probability of every completion token: [N, T] (0 on
// padding), computed in chunks; differentiable unless called under no_grad.
model::TokenLogprobs completion_logprobs(model::CausalLMImpl& model, const RolloutBatch& batch,
                                         const model::LogprobOptions& options);

}  // namespace grpo::trainer
