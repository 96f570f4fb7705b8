#include "trainer/micro_batches.h"

#include <algorithm>

namespace grpo::trainer {

std::vector<MicroBatch> split_micro_batches(const GenerationBatch& batch, const at::Tensor& advantages, int64_t size,
                                            int64_t pad_id, bool overlong_filter) {
  const auto N = static_cast<int64_t>(batch.size());
  double active = 0;
  for (const auto& s : batch.sequences)
    if (!(overlong_filter && s.truncated)) active += static_cast<double>(s.completion_ids.size());
  at::Tensor adv = advantages.to(at::kFloat);
  std::vector<MicroBatch> out;
  for (int64_t b0 = 0; b0 < N; b0 += size) {
    const int64_t n = std::min(size, N - b0);
    std::vector<RolloutSequence> part(batch.sequences.begin() + b0, batch.sequences.begin() + b0 + n);
    MicroBatch mb;
    mb.batch = make_rollout_batch(part, pad_id, overlong_filter);
    mb.advantages = adv.narrow(0, b0, n);
    mb.dapo_active_tokens = active;
    mb.active_tokens = static_cast<int64_t>(mb.batch.completion_mask.sum().item<double>());
    out.push_back(std::move(mb));
  }
  return out;
}

}  // namespace grpo::trainer
