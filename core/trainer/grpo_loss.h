// The GRPO policy loss of one micro-batch (spec grpo.md §4, §5, §8): clipped
// importance-weighted advantages, the k3 KL penalty, and the aggregation over
// tokens that `loss_type` selects. Formulas follow TRL v1.9.0 `_compute_loss`.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "trainer/device_metrics.h"
#include "trainer/loss_type.h"

namespace grpo::trainer {


// Token: one ratio per token. Sequence (GSPO): one ratio per sequence,
// exp of the masked mean of (logp - old); TRL warns that it length-weights
// sequences with any loss_type but grpo.
enum class IsLevel { Token, Sequence };

struct LossOptions {
  LossType loss_type = LossType::Grpo;
  IsLevel level = IsLevel::Token;
  double epsilon_low = 0.2;   // ratio clipped below at 1 - epsilon_low
  double epsilon_high = 0.2;  // ... and above at 1 + epsilon_high (DAPO suggests 0.28)
  std::optional<double> delta;  // two-sided clipping: cap on the unclipped ratio (should be > 1 + epsilon_high)
  double beta = 0.04;           // KL coefficient; 0 = no reference model, no `kl` metric
  bool use_bias_correction_kl = false;  // multiply the per-token KL by the ratio (DeepSeek-V3.2)
  int64_t gradient_accumulation_steps = 1;  // GA: divides grpo, bnpo and dr_grpo, not dapo
  int64_t max_completion_length = 512;      // dr_grpo's constant normaliser
  // dapo: active tokens of the whole generation batch (every rank, every
  // micro-batch) divided by world_size. <= 0 falls back to this micro-batch's
  // own count, which is only right when the micro-batch is the whole batch.
  double dapo_active_tokens = 0;
};

struct LossInputs {
  at::Tensor logp;        // [B, T], requires grad: log-prob of each sampled token under the policy
  at::Tensor old_logp;    // [B, T] or undefined (= logp.detach(), ratio 1); treated as a constant
  at::Tensor ref_logp;    // [B, T], required when beta != 0; treated as a constant
  at::Tensor advantages;  // [B] (or [B, 1], or per token [B, T])
  at::Tensor mask;        // [B, T] bool or 0/1 float: completion tokens that carry loss
  at::Tensor is_weight;   // [B, T] or [B, 1] or undefined: importance-sampling correction of the
                          // policy term for completions another sampler produced (grpo.md §7)
};

struct LossOutput {
  at::Tensor loss;            // scalar, differentiable w.r.t. logp; exactly 0 when every token is masked
  at::Tensor per_token_loss;  // [B, T] detached, 0 on masked tokens
  at::Tensor ratio;           // [B, T] (token) or [B, 1] (sequence), detached: TRL's coef_1, capped at delta,
                              // not clipped; 1 on masked tokens
  at::Tensor per_token_kl;    // [B, T] detached, 0 on masked tokens; undefined when beta == 0
  // `kl` (beta != 0), `clip_ratio/low_mean`, `clip_ratio/low_min`,
  // `clip_ratio/high_mean`, `clip_ratio/high_max`, `clip_ratio/region_mean`:
  // 0-dim float64 tensors on logp's device, read with the step's other
  // metrics (device_metrics.h). NaN when the micro-batch has no active
  // token: there is nothing to average, and the readers leave them out as
  // TRL's nanmean skips its NaN.
  MetricTensors metrics;
};

// Computes in float32 when logp is a 16-bit type, else in logp's dtype.
// Masked positions never reach the loss or the gradient, even when the
// log-probs there are garbage (padding). Throws std::invalid_argument on
// shapes that do not match or options that make no sense.
LossOutput grpo_loss(const LossInputs& inputs, const LossOptions& options);

}  // namespace grpo::trainer
