// The accuracy of one completion, shared by the accuracy and cosine plugins.
#pragma once

#include <string>

#include <grpo/sdk.hpp>

#include "math_verify.h"

namespace grpo::rewards {

// 1.0 when the completion's answer equals the row's `solution`, else 0.0.
// Internal errors of the math engine score 0.0 and are counted in
// `rewards/<plugin>/internal_errors` — never an exception.
inline double accuracy_of(const grpo::RewardSample& sample, const grpo::Host& host, const char* plugin) {
  std::optional<std::string_view> solution = sample.column("solution");
  if (!solution)
    throw grpo::Error(std::string(plugin) +
                      " needs a 'solution' column in the dataset (the reference answer, e.g. \"\\\\boxed{42}\" or "
                      "\"42\"); this row has: " + std::string(sample.columns_json().substr(0, 200)));
  grpo::math::VerifyResult r = grpo::math::accuracy_reward(sample.completion(), *solution);
  if (r.internal_error) host.metric(std::string("rewards/") + plugin + "/internal_errors", 1.0);
  return r.reward;
}

}  // namespace grpo::rewards
