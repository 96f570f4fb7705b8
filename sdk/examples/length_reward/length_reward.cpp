// A complete reward plugin: 1.0 when a completion is longer than `min_chars`
// characters (default 1024), else 0.0.
#include <grpo/sdk.hpp>

struct LengthReward : grpo::RewardBase {
  static constexpr const char* name = "length_reward";
  static constexpr const char* version = "1.0.0";
  static constexpr const char* description = "1.0 if the completion is longer than min_chars characters";
  static constexpr bool thread_safe = true;  // score() only reads its own state

  static std::vector<grpo::OptionSpec> options() {
    return {{"min_chars", "int", "1024", "completions longer than this score 1.0"}};
  }

  LengthReward(const grpo::Options& options, const grpo::Host& host)
      : min_chars(options.get_int("min_chars", 1024)) {
    if (min_chars < 0) throw grpo::Error("min_chars must be >= 0");
    host.debug("length_reward ready");
  }

  void score(const grpo::RewardBatch& batch, double* rewards) const {
    for (size_t i = 0; i < batch.size(); ++i)
      rewards[i] = batch[i].completion().size() > static_cast<size_t>(min_chars) ? 1.0 : 0.0;
  }

  long long min_chars;
};

GRPO_EXPORT_REWARD(LengthReward)
