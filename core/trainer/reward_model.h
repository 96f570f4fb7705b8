// --reward_model: a Hugging Face sequence-classification checkpoint
// (Qwen2ForSequenceClassification, LlamaForSequenceClassification, ...) as a
// reward column. The causal LM body plus a `score` head with one label; the
// reward is the head's logit at the last non-pad token, as transformers
// picks it, of prompt + completion rendered by the reward model's own chat
// template. Scored without gradients.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "model/transformer.h"
#include "rewards/reward_set.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace grpo::trainer {

class RewardModel : public rewards::HostReward {
 public:
  // Throws model::CheckpointError naming the directory for a checkpoint
  // that is no single-label sequence classifier, or lacks its score head.
  RewardModel(const std::string& dir, at::ScalarType dtype, at::Device device = at::kCPU);

  // Its metric name: the directory's basename, as ms-swift and TRL name it.
  const std::string& name() const override { return name_; }
  std::vector<double> score(const std::vector<Sample>& samples) override;

  // The reward of one token sequence: the score head at the last token that
  // is not the pad token (the last token when none is set); NaN for none.
  double score_ids(const std::vector<int32_t>& ids);
  // The same for many: left-padded into batches of at most kBatchTokens
  // padded tokens, one forward per batch, the scores read back once.
  std::vector<double> score_rows(std::vector<std::vector<int32_t>> rows);
  static constexpr int64_t kBatchTokens = 16384;
  // The text a sample is scored on: its prompt's messages then the
  // completion as the assistant's turn, in the reward model's template.
  std::string text_of(const Sample& sample) const;

 private:
  // rows[which[k]] for each k, left-padded into one batch: [which.size()] on the model's device.
  at::Tensor score_batch(const std::vector<std::vector<int32_t>>& rows, const std::vector<size_t>& which);

  std::string name_;
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  tok::ChatFamily family_ = tok::ChatFamily::ChatML;
  model::CausalLM body_{nullptr};
  at::Tensor head_;  // [1, H]
  int64_t pad_id_ = -1;
};

}  // namespace grpo::trainer
