// The training prompts: dataset rows rendered in the model's chat format and
// tokenized once, served in shuffled order epoch after epoch.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "plugins/reward_input.h"
#include "tokenizer/chat_prompt.h"

namespace grpo::trainer {

struct Prompt {
  std::vector<int32_t> ids;
  std::string messages_json;
  std::shared_ptr<const plugins::RowColumns> columns;  // every column but `messages`, for the rewards
};

class PromptSource {
 public:
  // Throws data::DataError naming file:line for a row without a prompt.
  // Prompts longer than max_prompt_tokens (<= 0: no limit) are cut as
  // `truncation` says: left keeps the end, right keeps the start, delete
  // drops the row (counted in dropped()).
  PromptSource(const std::vector<std::string>& datasets, const tok::Tokenizer& tokenizer, tok::ChatFamily family,
               const std::string& system, bool shuffle, uint64_t seed, int64_t max_prompt_tokens = 0,
               const std::string& truncation = "left");
  size_t dropped() const { return dropped_; }

  // Where the source stands (order, position, random state), for resuming
  // exactly where a checkpoint left off.
  nlohmann::json state() const;
  void restore(const nlohmann::json& state);

  // The next `n` prompts; a new (reshuffled) epoch starts when the rows run out.
  std::vector<const Prompt*> next(size_t n);
  size_t size() const { return prompts_.size(); }
  double epoch() const;  // fractional epochs served so far

 private:
  std::vector<Prompt> prompts_;
  std::vector<size_t> order_;
  size_t cursor_ = 0, epochs_done_ = 0, dropped_ = 0;
  bool shuffle_;
  std::mt19937_64 rng_;
};

}  // namespace grpo::trainer
