// ms-swift's math tip schedulers: when the answer is wrong (its accuracy
// reward against column `solution` is not 1), the policy is told so once
// and answers again.
//   math_tip_trick_multi_turn  the tip comes as a user message (ms-swift's
//                              MathTipsMultiTurnScheduler).
//   math_tip_trick             ms-swift's MathTipsScheduler continues the
//                              assistant's own message with the tip; here,
//                              where the policy's tokens are never
//                              re-tokenized or cut, the tip is a user
//                              message too: the same hint, one turn later.
#include <string>

#include <grpo/sdk.hpp>

#include "accuracy_score.h"

namespace {

constexpr const char* kTip =
    "The answer is not correct, It seems You made a mistake, you need to recheck very carefully.";

bool solved(const grpo::Turn& turn) {
  const std::optional<std::string_view> solution = turn.column("solution");
  if (!solution)
    throw grpo::Error("math_tip_trick needs a 'solution' column in the dataset (the reference answer)");
  return grpo::math::accuracy_reward(turn.completion(), *solution).reward == 1.0;
}

template <const char* const* Name>
struct MathTip : grpo::MultiturnBase<bool> {  // state: the tip was given
  static constexpr const char* name = *Name;
  static constexpr const char* version = "1.0.0";
  static constexpr const char* description =
      "a wrong answer (accuracy against column 'solution') gets one user message saying so, then a second try";
  static constexpr bool thread_safe = true;

  MathTip(const grpo::Options&, const grpo::Host&) {}

  void step(bool& tipped, const grpo::Turn& turn, grpo::TurnResult& out) const {
    if (tipped || solved(turn)) return out.finish();  // the tip is given once
    tipped = true;
    out.append("user", kTip);
  }
};

constexpr const char* kMultiTurnName = "math_tip_trick_multi_turn";
constexpr const char* kName = "math_tip_trick";

}  // namespace

GRPO_EXPORT_PLUGINS(grpo::multiturn<MathTip<&kName>>(), grpo::multiturn<MathTip<&kMultiTurnName>>())
