// output_dir/completions.jsonl: one JSON object per sampled completion —
// step, prompt, completion, token count, finish reason, each reward and the
// advantage — the row-per-completion layout people grep and load (ms-swift
// wrote one column-oriented line per step instead).
#pragma once

#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "plugins/sample.h"
#include "rewards/reward_set.h"
#include "trainer/jsonl_appender.h"

namespace grpo::trainer {

class CompletionLog {
 public:
  explicit CompletionLog(const std::string& output_dir);
  // rewards.by_fn: [F][N]; advantages: [N].
  void write(int64_t step, const std::vector<Sample>& samples, const rewards::RewardMatrix& rewards,
             const at::Tensor& advantages);

 private:
  JsonlAppender out_;
};

}  // namespace grpo::trainer
