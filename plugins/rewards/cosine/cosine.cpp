// cosine (arXiv 2502.03373): a length-scaled reward — short correct answers
// earn most, short wrong answers lose most. Length is in generated tokens.
// Unlike ms-swift, t is clamped to cosine_max_len: the cosine would rise again
// past it, rewarding overlong answers.
#include <algorithm>
#include <cmath>

#include <grpo/sdk.hpp>

#include "accuracy_score.h"

namespace {

// t = 0 -> hi, t = T -> lo.
double cosfn(double t, double T, double lo, double hi) {
  return hi - (hi - lo) * (1.0 - std::cos(M_PI * t / T)) / 2.0;
}

}  // namespace

struct Cosine : grpo::RewardBase {
  static constexpr const char* name = "cosine";
  static constexpr const char* version = "1.0.0";
  static constexpr const char* description = "accuracy scaled by length with a cosine schedule (needs 'solution')";
  static constexpr bool thread_safe = true;  // as accuracy

  static std::vector<grpo::OptionSpec> options() {
    return {{"cosine_min_len_value_wrong", "float", "-0.5", "reward of a wrong answer of length 0"},
            {"cosine_max_len_value_wrong", "float", "0.0", "reward of a wrong answer at cosine_max_len"},
            {"cosine_min_len_value_correct", "float", "1.0", "reward of a correct answer of length 0"},
            {"cosine_max_len_value_correct", "float", "0.5", "reward of a correct answer at cosine_max_len"},
            {"cosine_max_len", "int", "null", "length in tokens where the schedule ends (default max_completion_length)"},
            {"max_completion_length", "int", "512", "default for cosine_max_len"}};
  }

  Cosine(const grpo::Options& o, const grpo::Host& h)
      : host(h),
        min_wrong(o.get_double("cosine_min_len_value_wrong", -0.5)),
        max_wrong(o.get_double("cosine_max_len_value_wrong", 0.0)),
        min_correct(o.get_double("cosine_min_len_value_correct", 1.0)),
        max_correct(o.get_double("cosine_max_len_value_correct", 0.5)),
        max_len(o.get_int("cosine_max_len", o.get_int("max_completion_length", 512))) {
    if (max_len <= 0) throw grpo::Error("cosine_max_len must be > 0, got " + std::to_string(max_len));
  }

  void score(const grpo::RewardBatch& batch, double* rewards) const {
    for (size_t i = 0; i < batch.size(); ++i) {
      const int64_t tokens = batch[i].completion_tokens();
      if (tokens < 0)
        throw grpo::Error("cosine needs the generated token count of each completion; give completion_ids or "
                          "num_tokens in the completions file");
      const bool correct = grpo::rewards::accuracy_of(batch[i], host, name) >= 1.0;
      const double lo = correct ? max_correct : max_wrong;
      const double hi = correct ? min_correct : min_wrong;
      const double t = std::min<double>(static_cast<double>(tokens), static_cast<double>(max_len));
      rewards[i] = cosfn(t, static_cast<double>(max_len), lo, hi);
    }
  }

  grpo::Host host;
  double min_wrong, max_wrong, min_correct, max_correct;
  long long max_len;
};

GRPO_EXPORT_REWARD(Cosine)
