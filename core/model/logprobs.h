// Per-token log-probabilities and entropy of sampled tokens, computed in
// chunks along the sequence so that a [B, T, vocab] float tensor never exists
// at once — neither in the forward pass nor in the backward pass.
#pragma once

#include <ATen/ATen.h>

#include "model/transformer.h"

namespace grpo::model {

struct LogprobOptions {
  double temperature = 1.0;    // logits are divided by it (the sampling temperature)
  int64_t chunk_tokens = 256;  // rows of B*T scored per chunk
  bool entropy = false;        // also compute the entropy of each position's distribution
};

struct TokenLogprobs {
  at::Tensor logprobs;  // [B, T] float32; differentiable w.r.t. hidden and the output weight
  at::Tensor entropy;   // [B, T] float32, no grad; undefined unless asked
};

// hidden: [B, T, H], the states that predict targets: [B, T]. weight: the
// output projection [V, H] (lm_head or the tied embedding).
// Rationale: backward recomputes each chunk's logits instead of keeping them,
// trading one extra matmul per chunk for O(chunk x V) memory.
TokenLogprobs chunked_logprobs(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                               const LogprobOptions& options);

// For whole sequences ids: [B, L] (prompt + completion): the log-probability
// of each token given the ones before it, [B, L-1] (position t scores ids[t+1]).
TokenLogprobs sequence_logprobs(CausalLMImpl& model, const at::Tensor& ids, const at::Tensor& attention_mask,
                                const LogprobOptions& options);

}  // namespace grpo::model
