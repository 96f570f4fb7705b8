// The loss types and their flag spellings, in one place: the flag table takes
// its choices from here and the trainer's settings parse through it. Adding
// a loss type is this table and its formula in grpo_loss.cpp.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace grpo::trainer {

// grpo: mean over sequences of each sequence's token mean, / GA.
// bnpo: token mean of the micro-batch, / GA.
// dr_grpo: token sum / (B * max_completion_length), / GA.
// dapo: token sum / (active tokens of the whole generation batch / world size), no / GA.
enum class LossType { Grpo, Bnpo, DrGrpo, Dapo };

inline const std::vector<std::pair<std::string, LossType>>& loss_type_names() {
  static const std::vector<std::pair<std::string, LossType>> names = {
      {"grpo", LossType::Grpo}, {"bnpo", LossType::Bnpo}, {"dr_grpo", LossType::DrGrpo}, {"dapo", LossType::Dapo}};
  return names;
}

inline std::vector<std::string> loss_type_spellings() {
  std::vector<std::string> out;
  for (const auto& entry : loss_type_names()) out.push_back(entry.first);
  return out;
}

}  // namespace grpo::trainer
