// Pairs logged completions with their dataset rows for `grpo-host score`.
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"
#include "plugins/reward_input.h"

namespace grpo::score {

// Each completion line: {"completion": text} plus optional "row" (index into
// the dataset), "completion_ids" (generated ids), "num_tokens", and
// "is_truncated" or "finish_reason" ("length" = truncated). Without "row",
// line i goes with row i, or — when there are G times more completions than
// rows — lines are G consecutive copies per row, as the trainer writes them.
// Throws data::DataError naming file:line on a bad line.
std::vector<plugins::RewardInput> pair_completions(const std::vector<data::Row>& rows,
                                                   const std::vector<data::Row>& completions,
                                                   const std::string& system);

}  // namespace grpo::score
