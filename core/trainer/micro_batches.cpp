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
    if (batch.sampler_logprobs.size() == batch.size()) {
      at::Tensor lp = at::zeros(mb.batch.completion_ids.sizes(), at::kFloat);
      auto acc = lp.accessor<float, 2>();
      bool complete = true;
      for (int64_t i = 0; i < n && complete; ++i) {
        const auto& row = batch.sampler_logprobs[static_cast<size_t>(b0 + i)];
        complete = row.size() == part[static_cast<size_t>(i)].completion_ids.size();
        for (size_t t = 0; complete && t < row.size(); ++t) acc[i][static_cast<int64_t>(t)] = row[t];
      }
      if (complete) mb.sampler_logp = lp;  // a sampler that reports none leaves it undefined
    }
    out.push_back(std::move(mb));
  }
  return out;
}

}  // namespace grpo::trainer
