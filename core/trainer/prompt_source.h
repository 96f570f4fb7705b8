// The training prompts: dataset rows rendered in the model's chat format and
// tokenized once, served in shuffled order epoch after epoch.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "plugins/sample.h"
#include "tokenizer/chat_prompt.h"

namespace grpo::trainer {

// How rows become prompt token ids. Prompts longer than max_prompt_tokens
// (<= 0: no limit) are cut as `truncation` says: left keeps the end, right
// keeps the start, delete drops the row (counted in dropped()).
enum class Truncation { Left, Right, Delete };

struct PromptFormat {
  const tok::Tokenizer* tokenizer = nullptr;
  tok::ChatFamily family = tok::ChatFamily::ChatML;
  std::string system;
  int64_t max_prompt_tokens = 0;
  Truncation truncation = Truncation::Left;
  std::string tools_json;  // a multi-turn handler's tool schemas, described in the system turn; empty: none
};

// The rows of every dataset spec, in order (`bad`: see data::load_rows).
std::vector<data::Row> load_dataset_rows(const std::vector<data::DatasetSource>& datasets, data::BadRows* bad = nullptr);

class PromptSource {
 public:
  // Throws data::DataError naming file:line for a row without a prompt,
  // unless `bad` skips such rows (and counts them). `what` names the data in
  // the error for an empty source ("training", "validation").
  PromptSource(std::vector<data::Row> rows, const PromptFormat& format, bool shuffle, uint64_t seed,
               data::BadRows* bad = nullptr, const std::string& what = "training");
  size_t dropped() const { return dropped_; }
  size_t truncated() const { return truncated_; }

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
  size_t cursor_ = 0, epochs_done_ = 0, dropped_ = 0, truncated_ = 0;
  bool shuffle_;
  std::mt19937_64 rng_;
};

}  // namespace grpo::trainer
