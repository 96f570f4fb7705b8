// Multi-turn rollouts: G conversations per prompt, advanced together. Every
// turn of every live conversation is sampled in one batched generate call;
// between turns a grpo.multiturn handler decides, conversation by
// conversation, what follows. The policy's tokens are kept exactly as
// sampled; what the handler appends is rendered by the chat template into
// ids that carry no loss (Sample::sampled).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plugins/multiturn_handler.h"
#include "plugins/sampler_client.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace grpo::trainer {

struct ConversationLimits {
  std::optional<int64_t> max_turns;  // policy turns; unset: no limit but the length
  int64_t max_completion_length = 0; // per turn, or for all completion-side ids with total_scope
  bool total_scope = false;
  // Prompt + completion tokens the model takes (max_length, else its
  // max_position_embeddings): under the per-round scope too, a conversation
  // whose next message would leave no room for an answer ends there by length.
  int64_t context = INT64_MAX;
};

// One batched generate call: completions in request order, copies in index
// order (SamplerClient::generate, or an engine in-process), with the call's
// prefix_flags (GRPO_PREFIX_CONTINUES / GRPO_PREFIX_KEEP).
using GenerateFn = std::function<std::vector<Sample>(const std::vector<plugins::SampleRequest>&, uint64_t)>;

class ConversationRunner {
 public:
  // All three must outlive the runner.
  ConversationRunner(plugins::MultiturnHandler& handler, const tok::Tokenizer& tokenizer, tok::ChatFamily family,
                     ConversationLimits limits);

  // The conversations of `requests` (n per request), in the order a single
  // generate call returns completions, each run to its end. Adds turns/mean,
  // turns/max, tools/call_frequency, tools/failure_frequency and
  // multi_turn/handler_errors to `metrics` under `prefix`.
  std::vector<Sample> run(const GenerateFn& generate, const std::vector<plugins::SampleRequest>& requests,
                          const plugins::TrainerState& state, std::map<std::string, double>& metrics,
                          const std::string& prefix = "");
  std::vector<Sample> run(plugins::SamplerClient& sampler, const std::vector<plugins::SampleRequest>& requests,
                          const plugins::SampleOptions& options, const plugins::TrainerState& state,
                          std::map<std::string, double>& metrics, const std::string& prefix = "") {
    return run([&](const std::vector<plugins::SampleRequest>& r,
                   uint64_t prefix_flags) { return sampler.generate(r, options, prefix_flags); },
               requests, state, metrics, prefix);
  }

 private:
  struct Live;
  // Takes one sampled turn into its conversation; returns the next request,
  // or nothing when the conversation has ended.
  std::optional<plugins::SampleRequest> advance(Live& c, Sample&& turn, const plugins::TrainerState& state);
  void finish(Live& c, const plugins::TrainerState& state);
  plugins::TurnView last_turn(const Live& c, const plugins::TrainerState& state) const;

  plugins::MultiturnHandler& handler_;
  const tok::Tokenizer& tokenizer_;
  tok::ChatFamily family_;
  ConversationLimits limits_;
  std::atomic<uint64_t> next_id_{0};  // conversation ids, unique in the run (async and evaluation share it)
  std::atomic<bool> told_context_{false};  // the first conversation cut at the context is logged
};

}  // namespace grpo::trainer
