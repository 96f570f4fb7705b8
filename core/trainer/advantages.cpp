#include "trainer/advantages.h"

#include "rewards/reward_set.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace grpo::trainer {
namespace {

// The epsilon added to the std before dividing (spec §2: 1e-4, as swift and TRL).
constexpr double kStdEpsilon = 1e-4;

struct RowStats {
  at::Tensor centred;  // [K, M]: x - nanmean of its row
  at::Tensor std;      // [K]: Bessel-corrected nanstd; NaN where a row has < 2 values
};

// Mean and std of each row, ignoring NaN. One value says nothing about the
// spread, hence NaN with fewer than two.
// Rationale: the row is first shifted by one of its own values, so a row of
// equal rewards centres to exactly 0 (not to the ~1e-16 of a rounded mean,
// which the division by std + 1e-4 would blow up to ~1e-12).
// x: [K, M]
RowStats row_stats(const at::Tensor& x) {
  at::Tensor shift = std::get<0>(at::nanmedian(x, 1, /*keepdim=*/true));       // [K, 1], a member of the row
  at::Tensor d = x - shift;                                                     // [K, M]
  at::Tensor centred = d - at::nanmean(d, {1}, /*keepdim=*/true);               // [K, M]
  at::Tensor count = (~at::isnan(x)).sum(1).to(at::kDouble);                    // [K]
  at::Tensor var = at::nansum(centred.pow(2), {1}) / (count - 1.0);             // [K]
  at::Tensor nan = at::full_like(var, std::numeric_limits<double>::quiet_NaN());
  return {centred, at::where(count >= 2.0, var.sqrt(), nan)};
}

// torch.isclose(std, 0) with its default tolerances: |std| <= 1e-8; NaN is not close.
at::Tensor is_zero_std(const at::Tensor& std) { return std.abs() <= 1e-8; }

void check_geometry(int64_t n, int64_t num_generations) {
  if (num_generations < 1) {
    throw std::invalid_argument("compute_advantages: num_generations must be >= 1, got " +
                                std::to_string(num_generations));
  }
  if (n % num_generations != 0) {
    throw std::invalid_argument("compute_advantages: " + std::to_string(n) +
                                " completions do not split into groups of num_generations = " +
                                std::to_string(num_generations) + " (" + std::to_string(n) + " % " +
                                std::to_string(num_generations) + " = " + std::to_string(n % num_generations) +
                                "); the generation batch must be a multiple of num_generations");
  }
}

}  // namespace

Advantages compute_advantages(const at::Tensor& rewards_nf, const std::vector<double>& weights,
                              int64_t num_generations, ScaleRewards scale) {
  if (rewards_nf.dim() != 2) {
    throw std::invalid_argument("compute_advantages: the reward matrix must be 2-D [completions, reward functions], got " +
                                std::to_string(rewards_nf.dim()) + " dimension(s)");
  }
  const int64_t n = rewards_nf.size(0);
  const int64_t f = rewards_nf.size(1);
  check_geometry(n, num_generations);
  if (static_cast<int64_t>(weights.size()) != f) {
    throw std::invalid_argument("compute_advantages: " + std::to_string(weights.size()) +
                                " reward weight(s) for " + std::to_string(f) +
                                " reward function(s); reward_weights needs one weight per reward function");
  }
  at::Tensor r_nf = rewards_nf.to(at::kCPU, at::kDouble).contiguous();                   // [N, F]
  std::vector<std::vector<double>> by_fn(static_cast<size_t>(f), std::vector<double>(static_cast<size_t>(n)));
  auto acc = r_nf.accessor<double, 2>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < f; ++k) by_fn[static_cast<size_t>(k)][static_cast<size_t>(i)] = acc[i][k];
  return group_advantages(at::tensor(rewards::weighted_total(by_fn, weights), at::kDouble), num_generations, scale);
}

Advantages group_advantages(const at::Tensor& rewards, int64_t num_generations, ScaleRewards scale) {
  if (rewards.dim() != 1) {
    throw std::invalid_argument("group_advantages: the rewards must be 1-D [completions], got " +
                                std::to_string(rewards.dim()) + " dimension(s)");
  }
  const int64_t n = rewards.size(0);
  check_geometry(n, num_generations);
  if (n == 0) {
    const auto opts = at::TensorOptions().dtype(at::kDouble);
    return {at::empty({0}, opts), at::empty({0}, opts), at::empty({0}, opts), 0, 0.0};
  }
  // Statistics in float64 on the CPU: N is the generation batch (small) and
  // the mean/std of nearly equal rewards lose digits in float32.
  at::Tensor r = rewards.to(at::kCPU, at::kDouble);                                       // [N]
  at::Tensor all_nan = at::isnan(r);                                                      // [N]

  const int64_t groups = n / num_generations;
  at::Tensor grouped = r.view({groups, num_generations});                                 // [N/G, G]
  RowStats group = row_stats(grouped);
  at::Tensor group_std = group.std;                                                       // [N/G]
  at::Tensor centred = group.centred.reshape({n});                                        // [N], r - mean_g
  // The batch std is what TRL divides by and checks for zero under `batch`.
  at::Tensor batch_std = row_stats(r.view({1, n})).std;                                   // [1]

  Advantages out;
  at::Tensor a;
  switch (scale) {
    case ScaleRewards::Group:
      a = centred / (group_std.repeat_interleave(num_generations) + kStdEpsilon);
      break;
    case ScaleRewards::Batch:
      a = centred / (batch_std + kStdEpsilon);
      break;
    case ScaleRewards::None:
      a = centred;
      break;
  }
  // Unscorable rows and groups with one scored row end up NaN: they get no
  // advantage, hence no gradient, instead of poisoning the loss.
  out.advantages = at::nan_to_num(a, 0.0);
  out.rewards = r;
  out.group_std = group_std;
  out.all_nan_rows = all_nan.sum().item<int64_t>();
  if (scale == ScaleRewards::Batch) {
    out.frac_zero_std = is_zero_std(batch_std).to(at::kDouble).item<double>();
  } else {
    out.frac_zero_std = is_zero_std(group_std).to(at::kDouble).mean().item<double>();
  }
  return out;
}

}  // namespace grpo::trainer
