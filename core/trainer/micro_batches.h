// A generation batch cut into the micro-batches that forward and backward
// run on, with what stays constant across the num_iterations passes over it:
// advantages, and the old and reference log-probs when the step needs them.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "trainer/generation_batch.h"
#include "trainer/rollout_batch.h"

namespace grpo::trainer {

struct MicroBatch {
  RolloutBatch batch;
  at::Tensor advantages;          // [n] float32
  at::Tensor old_logp, ref_logp;  // [n, T] constants, or undefined (old: ratio 1; ref: beta 0)
  at::Tensor sampler_logp;        // [n, T] as the sampler reported them (0 on padding), or undefined
  at::Tensor is_weight;           // importance-sampling correction, or undefined
  double dapo_active_tokens = 0;  // loss-carrying tokens of the whole generation batch
  int64_t active_tokens = 0;      // ... of this micro-batch
};

// Rows [k*size, (k+1)*size) become micro-batch k (the last may be smaller).
// Data parallel, the batch is cut into micro-batches of size x world rows,
// and rank r trains on rows [r*size, (r+1)*size) of each: together the ranks'
// k-th micro-batches are the k-th micro-batch of one process with
// size x world, so both runs take the same steps. Their tensors are made on
// `device`.
std::vector<MicroBatch> split_micro_batches(const GenerationBatch& batch, const at::Tensor& advantages, int64_t size,
                                            int64_t pad_id, bool overlong_filter, int rank = 0, int world = 1,
                                            at::Device device = at::kCPU);

}  // namespace grpo::trainer
