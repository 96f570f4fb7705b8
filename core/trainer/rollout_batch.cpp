#include "trainer/rollout_batch.h"

#include <algorithm>
#include <stdexcept>

namespace grpo::trainer {

namespace {

// One row of a rollout batch, whatever holds it.
struct RowView {
  const std::vector<int32_t>* prompt;
  const std::vector<int32_t>* completion;
  bool truncated;
  bool carries_loss;
  const std::vector<uint8_t>* sampled = nullptr;  // multi-turn: appended ids (0) carry no loss
};

RolloutBatch lay_out(const std::vector<RowView>& rows, int64_t pad_id, at::Device device) {
  if (rows.empty()) throw std::invalid_argument("an empty rollout batch");
  size_t P = 0, T = 1;  // at least one completion column, so shapes stay valid for empty completions
  for (const auto& s : rows) {
    if (s.prompt->empty()) throw std::invalid_argument("a rollout sequence without prompt tokens");
    P = std::max(P, s.prompt->size());
    T = std::max(T, s.completion->size());
  }
  const auto N = static_cast<int64_t>(rows.size());
  const auto Pi = static_cast<int64_t>(P), Ti = static_cast<int64_t>(T);
  at::Tensor ids = at::full({N, Pi + Ti}, pad_id, at::kLong);
  at::Tensor attention = at::zeros({N, Pi + Ti}, at::kLong);
  at::Tensor cmask = at::zeros({N, Ti}, at::kFloat);
  at::Tensor truncated = at::zeros({N}, at::kBool);
  auto id_acc = ids.accessor<int64_t, 2>();
  auto att_acc = attention.accessor<int64_t, 2>();
  auto mask_acc = cmask.accessor<float, 2>();
  for (int64_t i = 0; i < N; ++i) {
    const RowView& s = rows[static_cast<size_t>(i)];
    const int64_t pad = Pi - static_cast<int64_t>(s.prompt->size());
    for (size_t t = 0; t < s.prompt->size(); ++t) {
      id_acc[i][pad + static_cast<int64_t>(t)] = (*s.prompt)[t];
      att_acc[i][pad + static_cast<int64_t>(t)] = 1;
    }
    for (size_t t = 0; t < s.completion->size(); ++t) {
      id_acc[i][Pi + static_cast<int64_t>(t)] = (*s.completion)[t];
      att_acc[i][Pi + static_cast<int64_t>(t)] = 1;
      const bool policy_token = !s.sampled || s.sampled->empty() || (*s.sampled)[t];
      mask_acc[i][static_cast<int64_t>(t)] = s.carries_loss && policy_token ? 1.0f : 0.0f;
    }
    truncated[i] = s.truncated;
  }
  RolloutBatch b;
  b.input_ids = ids.to(device);
  b.attention_mask = attention.to(device);
  b.completion_ids = ids.narrow(1, Pi, Ti).to(device);
  b.completion_mask = cmask.to(device);
  b.truncated = truncated.to(device);
  b.prompt_length = Pi;
  b.pad_id = pad_id;
  return b;
}

}  // namespace

RolloutBatch make_rollout_batch(const std::vector<RolloutSequence>& sequences, int64_t pad_id, bool overlong_filter,
                                at::Device device) {
  std::vector<RowView> rows;
  for (const auto& s : sequences)
    rows.push_back({&s.prompt_ids, &s.completion_ids, s.truncated, !(overlong_filter && s.truncated)});
  return lay_out(rows, pad_id, device);
}

RolloutBatch make_rollout_batch(const std::vector<Sample>& samples, size_t begin, size_t count, int64_t pad_id,
                                bool overlong_filter, at::Device device) {
  std::vector<RowView> rows;
  for (size_t i = begin; i < begin + count; ++i) {
    const Sample& s = samples.at(i);
    if (!s.prompt) throw std::invalid_argument("a sample without its prompt");
    rows.push_back({&s.prompt->ids, &s.ids, s.truncated(), s.carries_loss(overlong_filter), &s.sampled});
  }
  return lay_out(rows, pad_id, device);
}

model::TokenLogprobs completion_logprobs(model::CausalLMImpl& model, const RolloutBatch& batch,
                                         const model::LogprobOptions& options) {
  const int64_t P = batch.prompt_length, T = batch.completion_ids.size(1);
  // Position P - 1 + t predicts completion token t.
  at::Tensor hidden = model.hidden_states(batch.input_ids, batch.attention_mask).narrow(1, P - 1, T);  // [N, T, H]
  const at::Tensor& weight = model.lm_head ? model.lm_head->weight : model.model->embed_tokens->weight;
  model::TokenLogprobs out = model::chunked_logprobs(hidden, weight, batch.completion_ids, options);
  at::Tensor real = batch.attention_mask.narrow(1, P, T).to(at::kFloat);  // padding scores 0, not a pad token's logp
  out.logprobs = out.logprobs * real;
  if (out.entropy.defined()) out.entropy = out.entropy * real;
  return out;
}

}  // namespace grpo::trainer
