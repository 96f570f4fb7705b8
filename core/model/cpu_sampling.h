// Token sampling over a whole vocabulary without [B, V] temporaries.
#pragma once

#include <vector>

#include <ATen/ATen.h>

namespace grpo::model::cpu {

// For each row b of logits [B, V] (CPU; float32, bfloat16 or float16): the
// first token whose cumulative probability under softmax(logits / temperature)
// exceeds u[b] (in [0, 1)) — restricted, when 0 < top_k < V, to the tokens at
// least as likely as the k-th (ties kept) — and log p(token) under the whole
// tempered softmax. What sample_next computes with softmax, cumsum and a
// search, in two passes over each row and a partial third: at a 151,936-token
// vocabulary those ops wrote five fresh [B, V] float tensors per decoded token.
// Rows run on LibTorch's intra-op threads.
void sample_rows(const at::Tensor& logits, double temperature, int64_t top_k, const std::vector<float>& u,
                 int64_t* tokens, float* logprobs);

}  // namespace grpo::model::cpu
