#include "trainer/generation_batch.h"

#include <algorithm>
#include <cmath>

namespace grpo::trainer {

void GenerationBatch::append_group(const GenerationBatch& other, size_t group, size_t G) {
  if (rewards.names.empty()) {
    rewards.names = other.rewards.names;
    rewards.by_fn.assign(other.rewards.by_fn.size(), {});
  }
  for (size_t i = group * G; i < (group + 1) * G; ++i) {
    samples.push_back(other.samples[i]);
    for (size_t f = 0; f < other.rewards.by_fn.size(); ++f) rewards.by_fn[f].push_back(other.rewards.by_fn[f][i]);
    rewards.total.push_back(other.rewards.total[i]);
  }
}

at::Tensor reward_tensor(const rewards::RewardMatrix& rewards) {
  const auto F = static_cast<int64_t>(rewards.by_fn.size());
  const auto N = static_cast<int64_t>(rewards.total.size());
  at::Tensor out = at::empty({N, F}, at::kDouble);
  auto acc = out.accessor<double, 2>();
  for (int64_t f = 0; f < F; ++f)
    for (int64_t i = 0; i < N; ++i) acc[i][f] = rewards.by_fn[static_cast<size_t>(f)][static_cast<size_t>(i)];
  return out;
}

void GroupCollector::add(const GenerationBatch& attempt, const at::Tensor& group_std) {
  const size_t groups = attempt.size() / G_;
  auto std_acc = group_std.accessor<double, 1>();
  for (size_t g = 0; g < groups; ++g) {
    ++seen_groups_;
    const double s = std_acc[static_cast<int64_t>(g)];
    if (s > 0 && !full()) {  // NaN compares false: not valid
      valid_.append_group(attempt, g, G_);
    } else if (fallback_.size() / G_ < needed_) {
      fallback_.append_group(attempt, g, G_);
    }
  }
}

size_t GroupCollector::next_request() const {
  if (full()) return 0;
  if (valid_groups() == 0) return needed_;
  const double valid_rate = static_cast<double>(valid_groups()) / static_cast<double>(seen_groups_);
  const auto want = static_cast<size_t>(std::ceil(static_cast<double>(missing()) / valid_rate));
  return std::min(needed_, std::max<size_t>(want, 1));
}

GenerationBatch GroupCollector::take() {
  GenerationBatch out = std::move(valid_);
  for (size_t g = 0; out.size() / G_ < needed_ && g < fallback_.size() / G_; ++g) out.append_group(fallback_, g, G_);
  valid_ = {};
  fallback_ = {};
  seen_groups_ = 0;
  return out;
}

}  // namespace grpo::trainer
