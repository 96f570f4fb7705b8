// Rewards -> advantages (spec grpo.md §2): weighted reward per completion,
// then each completion compared with the other completions of its prompt.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace grpo::trainer {

// How the centred reward is divided: by its group's std (swift `true`, the
// default), by the std of the whole batch, or not at all (swift `false`, Dr.GRPO).
enum class ScaleRewards { Group, Batch, None };

inline const std::vector<std::pair<std::string, ScaleRewards>>& scale_rewards_names() {
  static const std::vector<std::pair<std::string, ScaleRewards>> names = {
      {"group", ScaleRewards::Group}, {"batch", ScaleRewards::Batch}, {"none", ScaleRewards::None}};
  return names;
}

struct Advantages {
  at::Tensor advantages;  // [N] float64, never NaN (unscorable rows and 1-valid groups get 0)
  at::Tensor rewards;     // [N] float64, nansum of the weighted rewards; NaN where every function abstained
  at::Tensor group_std;   // [N / G] float64, Bessel-corrected nanstd; NaN for groups with < 2 scored rows
  int64_t all_nan_rows = 0;   // rows where every reward function returned NaN (the caller warns)
  double frac_zero_std = 0;   // `frac_reward_zero_std`: groups whose std is 0 (batch: 1 if the batch std is 0)
};

// rewards: [N] weighted totals (rewards::weighted_total), N completions of
// the global generation batch with the G copies of a prompt consecutive; NaN
// where every function abstained. Throws std::invalid_argument when N % G != 0
// or the tensor is not 1-D.
Advantages group_advantages(const at::Tensor& rewards, int64_t num_generations, ScaleRewards scale);

// The same from the per-function scores: rewards_nf: [N, F], N completions of the global generation batch with the
// G copies of a prompt consecutive, F reward functions; NaN = "no opinion".
// weights: F reward weights. Throws std::invalid_argument when N % G != 0,
// weights.size() != F or the tensor is not 2-D.
Advantages compute_advantages(const at::Tensor& rewards_nf, const std::vector<double>& weights,
                              int64_t num_generations, ScaleRewards scale);

}  // namespace grpo::trainer
