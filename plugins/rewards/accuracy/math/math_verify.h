// Math answer verification with the semantics of Hugging Face Math-Verify as
// ms-swift's `accuracy` reward calls it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace grpo::math {

struct VerifyResult {
  double reward;        // 0.0 or 1.0
  bool internal_error;  // the comparison failed inside the algebra backend
};

// ms-swift accuracy semantics: the gold `solution` is parsed first (LaTeX and
// plain numbers); an unparseable gold gives 0. The completion must give its
// answer in \boxed{} or in LaTeX after "final answer is" / "answer:".
// Never throws; safe to call from several threads.
VerifyResult accuracy_reward(std::string_view completion, std::string_view solution);

// The normalised text of the answer found in a solution / completion, or
// nullopt when no pattern matches. For tests and diagnostics.
std::optional<std::string> extract_gold_answer(std::string_view solution);
std::optional<std::string> extract_completion_answer(std::string_view completion);

// Compares two bare LaTeX answers (no extraction), gold first.
bool latex_answers_equivalent(std::string_view gold_latex, std::string_view pred_latex);

}  // namespace grpo::math
