#include "trainer/micro_batches.h"

#include <algorithm>

namespace grpo::trainer {

std::vector<MicroBatch> split_micro_batches(const GenerationBatch& batch, const at::Tensor& advantages, int64_t size,
                                            int64_t pad_id, bool overlong_filter, int rank, int world,
                                            at::Device device) {
  const auto N = static_cast<int64_t>(batch.size());
  // Counted here, from the host's ids: read back from the device, each count
  // would wait for the GPU.
  std::vector<int64_t> active_in(batch.samples.size(), 0);
  bool all_logprobs = true;  // a sampler that reports none leaves sampler_logp undefined
  for (size_t i = 0; i < batch.samples.size(); ++i) {
    const Sample& s = batch.samples[i];
    if (s.carries_loss(overlong_filter))
      for (size_t t = 0; t < s.ids.size(); ++t) active_in[i] += s.sampled_at(t) ? 1 : 0;
    all_logprobs = all_logprobs && s.logprobs.size() == s.ids.size();
  }
  double active = 0;
  for (int64_t a : active_in) active += static_cast<double>(a);
  at::Tensor adv = advantages.to(device, at::kFloat);
  std::vector<MicroBatch> out;
  for (int64_t b0 = rank * size; b0 < N; b0 += size * world) {
    const int64_t n = std::min(size, N - b0);
    MicroBatch mb;
    mb.batch = make_rollout_batch(batch.samples, static_cast<size_t>(b0), static_cast<size_t>(n), pad_id,
                                  overlong_filter, device);
    mb.advantages = adv.narrow(0, b0, n);
    mb.dapo_active_tokens = active;
    for (int64_t i = b0; i < b0 + n; ++i) mb.active_tokens += active_in[static_cast<size_t>(i)];
    if (all_logprobs) {
      at::Tensor lp = at::zeros(mb.batch.completion_ids.sizes(), at::kFloat);
      auto acc = lp.accessor<float, 2>();
      for (int64_t i = 0; i < n; ++i) {
        const auto& row = batch.samples[static_cast<size_t>(b0 + i)].logprobs;
        for (size_t t = 0; t < row.size(); ++t) acc[i][static_cast<int64_t>(t)] = row[t];
      }
      mb.sampler_logp = lp.to(device);
    }
    out.push_back(std::move(mb));
  }
  return out;
}

}  // namespace grpo::trainer
