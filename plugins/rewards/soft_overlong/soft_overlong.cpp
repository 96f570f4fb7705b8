// soft_overlong (DAPO, arXiv 2503.14476): 0 inside the budget
// soft_max_length - soft_cache_length, falling linearly to -1 at
// soft_max_length. Floored at -1 as the paper does (ms-swift has no floor).
#include <algorithm>
#include <string>

#include <grpo/sdk.hpp>

struct SoftOverlong : grpo::RewardBase {
  static constexpr const char* name = "soft_overlong";
  static constexpr const char* version = "1.0.0";
  static constexpr const char* description = "DAPO soft overlong punishment on generated tokens, in [-1, 0]";
  static constexpr bool thread_safe = true;

  static std::vector<grpo::OptionSpec> options() {
    return {{"soft_max_length", "int", "null", "L_max in tokens (default max_completion_length)"},
            {"soft_cache_length", "int", "null", "L_cache in tokens; required, < soft_max_length"},
            {"max_completion_length", "int", "512", "default for soft_max_length"}};
  }

  SoftOverlong(const grpo::Options& o, const grpo::Host&) {
    max_length = o.get_int("soft_max_length", o.get_int("max_completion_length", 512));
    if (!o.has("soft_cache_length"))
      throw grpo::Error("soft_overlong needs --soft_cache_length (the last tokens before soft_max_length where the "
                        "penalty ramps up), e.g. --soft_cache_length " + std::to_string(max_length / 4));
    cache_length = o.get_int("soft_cache_length", 0);
    if (cache_length <= 0) throw grpo::Error("soft_cache_length must be > 0, got " + std::to_string(cache_length));
    if (cache_length >= max_length)
      throw grpo::Error("soft_cache_length (" + std::to_string(cache_length) + ") must be smaller than soft_max_length (" +
                        std::to_string(max_length) + "); lower --soft_cache_length or raise --soft_max_length");
  }

  void score(const grpo::RewardBatch& batch, double* rewards) const {
    for (size_t i = 0; i < batch.size(); ++i) {
      const int64_t tokens = batch[i].completion_tokens();
      if (tokens < 0)
        throw grpo::Error("soft_overlong needs the generated token count of each completion; give completion_ids "
                          "or num_tokens in the completions file");
      const double exceed = static_cast<double>(tokens - (max_length - cache_length));
      rewards[i] = std::max(-1.0, std::min(-exceed / static_cast<double>(cache_length), 0.0));
    }
  }

  long long max_length = 0;
  long long cache_length = 0;
};

GRPO_EXPORT_REWARD(SoftOverlong)
