// Correction for completions sampled by other weights than the ones that
// train on them (async generation, an external sampler): grpo.md §7, as TRL
// does it. rho = exp(old - sampler) per token, or exp(sum over the sequence)
// per sequence; ratios above the cap are truncated to it or masked to 0.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "trainer/device_metrics.h"

namespace grpo::trainer {

enum class IsCorrectionMode { TokenTruncate, TokenMask, SequenceTruncate, SequenceMask };

inline const std::vector<std::pair<std::string, IsCorrectionMode>>& is_correction_mode_names() {
  static const std::vector<std::pair<std::string, IsCorrectionMode>> names = {
      {"token_truncate", IsCorrectionMode::TokenTruncate},
      {"token_mask", IsCorrectionMode::TokenMask},
      {"sequence_truncate", IsCorrectionMode::SequenceTruncate},
      {"sequence_mask", IsCorrectionMode::SequenceMask}};
  return names;
}

// Throws std::invalid_argument for an unknown name.
IsCorrectionMode is_correction_mode(const std::string& name);

// old: [B, T] log-probs of the trainer's weights when the batch is trained on;
// sampler: [B, T] log-probs the sampler reported; mask: [B, T] tokens that
// carry loss. Returns the per-token weight [B, T] (or [B, 1] per sequence)
// that multiplies the policy loss. Adds `sampling/sampling_logp_difference/{mean,max}`
// and `sampling/importance_sampling_ratio/{min,mean,max}` to `metrics`
// (device tensors, NaN when no token is active).
at::Tensor importance_weights(const at::Tensor& old, const at::Tensor& sampler, const at::Tensor& mask,
                              IsCorrectionMode mode, double cap, MetricTensors& metrics);

}  // namespace grpo::trainer
