// One sampled completion, the only record of it from the sampler's sink to
// the loss: which prompt it answers, the ids exactly as sampled (never
// re-tokenized), the sampler's log-probs, its text and why it ended.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "plugins/reward_input.h"

namespace grpo {

// A prompt as it is sampled from: token ids in the model's chat format, the
// messages they were rendered from, and the row's other columns (for the
// rewards). Owned by its PromptSource for the whole run; samples point at it.
struct Prompt {
  std::vector<int32_t> ids;
  std::string messages_json;
  std::shared_ptr<const plugins::RowColumns> columns;  // every column but `messages`
  std::string text;  // the ids decoded, special tokens kept: the prompt for samplers that take text
};

// GRPO_FINISH_STOP / LENGTH / ABORT of grpo/sampler.h.
enum class FinishReason { Stop, Length, Abort };

inline std::string_view finish_reason_name(FinishReason f) {
  switch (f) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Abort: return "abort";
  }
  return "stop";
}

struct Sample {
  const Prompt* prompt = nullptr;  // null only where a caller sampled raw ids without a Prompt
  size_t request = 0;              // its request in the generate call
  uint32_t index = 0;              // the copy within that request
  std::vector<int32_t> ids;        // the completion
  std::vector<float> logprobs;     // the sampler's, one per id; empty when it reported none
  std::string text;
  FinishReason finish = FinishReason::Stop;

  // A multi-turn rollout (empty / defaults for a single turn). `ids` then
  // holds every turn: the policy's tokens and, between them, the handler's
  // appended messages as rendered by the chat template, which carry no loss.
  std::vector<uint8_t> sampled;    // per id: 1 sampled by the policy, 0 appended; empty: all sampled
  size_t last_turn_begin = 0;      // ids[last_turn_begin..] is the last policy turn, `text` its decoding
  std::string conversation_json;   // prompt messages, then every turn and appended message
  uint32_t turns = 1;              // policy turns
  uint32_t tool_calls = 0, tool_failures = 0;
  double environment_reward = std::numeric_limits<double>::quiet_NaN();  // the handler's own reward
  bool handler_failed = false;     // the handler failed on it: every reward is NaN

  bool sampled_at(size_t t) const { return sampled.empty() || sampled[t] != 0; }
  bool truncated() const { return finish == FinishReason::Length; }
  // Whether its tokens carry loss: an aborted completion never does (it did
  // not end as the policy chose), a truncated one not under overlong_filter.
  bool carries_loss(bool overlong_filter) const {
    return finish == FinishReason::Stop || (finish == FinishReason::Length && !overlong_filter);
  }
};

}  // namespace grpo
