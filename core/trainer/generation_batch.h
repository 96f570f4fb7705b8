// One generation batch as sampled and scored: one Sample per completion and
// their scores. The G copies of a prompt are consecutive, so a group is rows
// [g*G, (g+1)*G).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "plugins/sample.h"
#include "rewards/reward_set.h"

namespace grpo::trainer {

struct GenerationBatch {
  std::vector<Sample> samples;
  rewards::RewardMatrix rewards;  // filled by scoring: by_fn [F][N] and the weighted total [N]

  size_t size() const { return samples.size(); }
  // Appends group `group` (G consecutive rows) of `other`, scores included.
  void append_group(const GenerationBatch& other, size_t group, size_t G);
};

// The scores as the [N, F] float64 tensor compute_advantages takes.
at::Tensor reward_tensor(const rewards::RewardMatrix& rewards);

// dynamic_sample (DAPO, grpo.md §5): collects groups whose rewards differ
// (std > 0) across sampling attempts until a generation batch is full. Unlike
// swift, the valid groups of every attempt are kept, and when the attempts
// run out the batch is filled with the zero-variance groups seen so far
// rather than thrown away: they train nothing (advantage 0) but keep the
// batch geometry.
class GroupCollector {
 public:
  GroupCollector(size_t groups_needed, size_t G) : needed_(groups_needed), G_(G) {}

  // Takes every group of a scored attempt; group_std[g] is group g's reward
  // std (NaN when fewer than 2 rows were scored: not a valid group).
  void add(const GenerationBatch& attempt, const at::Tensor& group_std);
  bool full() const { return valid_groups() >= needed_; }
  size_t missing() const { return full() ? 0 : needed_ - valid_groups(); }
  // How many prompts the next attempt should sample: the missing groups over
  // the valid fraction seen so far, capped at one whole batch.
  size_t next_request() const;
  // The generation batch: valid groups first, then zero-variance ones.
  GenerationBatch take();

 private:
  size_t valid_groups() const { return valid_.size() / G_; }
  size_t needed_, G_;
  size_t seen_groups_ = 0;
  GenerationBatch valid_, fallback_;
};

}  // namespace grpo::trainer
