// format: 1.0 when the whole completion is
//   <think>...</think> (whitespace) <answer>...</answer>
// with nothing after </answer>, not even a newline — ms-swift's
// `^<think>.*?</think>\s*<answer>.*?</answer>(?![\s\S])` with DOTALL.
#include <grpo/sdk.hpp>

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

bool matches_format(std::string_view s) {
  constexpr std::string_view open_think = "<think>", close_think = "</think>";
  constexpr std::string_view open_answer = "<answer>", close_answer = "</answer>";
  if (s.size() < open_think.size() + close_think.size() + open_answer.size() + close_answer.size()) return false;
  if (s.substr(0, open_think.size()) != open_think) return false;
  if (s.substr(s.size() - close_answer.size()) != close_answer) return false;
  const size_t last_answer_close = s.size() - close_answer.size();
  // The lazy groups backtrack, so any </think> may end the think block.
  for (size_t p = s.find(close_think, open_think.size()); p != std::string_view::npos;
       p = s.find(close_think, p + 1)) {
    size_t q = p + close_think.size();
    while (q < s.size() && is_space(s[q])) ++q;
    if (s.substr(q, open_answer.size()) == open_answer && q + open_answer.size() <= last_answer_close) return true;
  }
  return false;
}

}  // namespace

struct Format : grpo::RewardBase {
  static constexpr const char* name = "format";
  static constexpr const char* version = "1.0.0";
  static constexpr const char* description =
      "1.0 if the completion is exactly <think>...</think> <answer>...</answer>, else 0.0";
  static constexpr bool thread_safe = true;

  Format(const grpo::Options&, const grpo::Host&) {}

  void score(const grpo::RewardBatch& batch, double* rewards) const {
    for (size_t i = 0; i < batch.size(); ++i) rewards[i] = matches_format(batch[i].completion()) ? 1.0 : 0.0;
  }
};

GRPO_EXPORT_REWARD(Format)
