// A multi-turn handler plugin instance (grpo.multiturn/1) as the trainer's
// conversation loop uses it. Calls never throw once the instance exists: a
// failing call is reported with the handler's name, counted, and ends only
// the conversation it was about.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <grpo/multiturn.h>
#include <nlohmann/json.hpp>

#include "plugins/call_worker.h"
#include "plugins/host_services.h"
#include "plugins/plugin_registry.h"
#include "plugins/reward_input.h"
#include "plugins/sample.h"
#include "tokenizer/chat_template.h"

namespace grpo::plugins {

// One conversation's last turn, as the handler is shown it.
struct TurnView {
  std::string conversation_json;
  std::string completion;
  const std::vector<int32_t>* ids = nullptr;
  FinishReason finish = FinishReason::Stop;
  uint32_t turn = 0;
  int64_t tokens_left = -1;
  const RowColumns* columns = nullptr;
  TrainerState state;
};

struct TurnDecision {
  bool done = true;
  std::vector<tok::ChatMessage> appended;  // user / tool messages
  uint32_t tool_calls = 0, tool_failures = 0;
  bool failed = false;  // the call failed: the conversation ends, its rewards are NaN
};

class MultiturnHandler {
 public:
  // Throws PluginError with the plugin's message when create() fails or the
  // table lacks create, step or destroy.
  // Calls past `timeout_s` seconds (<= 0: no limit) are abandoned: the
  // conversation ends, and later calls fail until the stuck one returns.
  // A handler that declares itself thread-safe gets up to `threads` calls
  // (of different conversations) at once (<= 0: one per core); any other,
  // one at a time.
  static std::unique_ptr<MultiturnHandler> create(const ResolvedPlugin& plugin, const nlohmann::json& options,
                                                  std::shared_ptr<MetricsSink> metrics,
                                                  const std::string& run_config_json, TextServices text = {},
                                                  double timeout_s = 0, int threads = 1);
  // The run's handler `name` from `registry`, its options resolved from the
  // run configuration and its plugin_args section, as rewards get theirs.
  static std::unique_ptr<MultiturnHandler> for_run(const PluginRegistry& registry, const std::string& name,
                                                   const nlohmann::json& run_config, const nlohmann::json& plugin_args,
                                                   std::shared_ptr<MetricsSink> metrics, TextServices text,
                                                   double timeout_s, int threads = 1);
  ~MultiturnHandler();
  MultiturnHandler(const MultiturnHandler&) = delete;
  MultiturnHandler& operator=(const MultiturnHandler&) = delete;

  const std::string& name() const { return plugin_.info.name; }
  const std::string& tools_json() const { return tools_; }  // empty: no tools
  bool has_reward() const { return (api_.flags & GRPO_MULTITURN_HAS_REWARD) && api_.reward; }

  // A conversation's state (null for a stateless handler). Sets *failed when
  // begin() fails; the conversation then has no turn after its first.
  grpo_conversation* begin(uint64_t id, const Prompt& prompt, int64_t prompt_index, uint32_t copy,
                           const TrainerState& state, bool* failed);
  TurnDecision step(grpo_conversation* conv, const TurnView& turn);
  // The environment's reward; NaN when it has none or the call failed.
  double reward(grpo_conversation* conv, const TurnView& last);
  void end(grpo_conversation* conv);

  long failures() const { return failures_; }  // failed calls since create()
  // How many calls may run at once: the conversation loop runs that many.
  size_t concurrency() const { return workers_.size(); }

 private:
  MultiturnHandler() = default;
  struct Call;
  // Runs `body` on a free worker; false (reported, counted) when it failed or timed out.
  bool call(const char* what, const std::function<grpo_status(grpo_error*)>& body, const std::shared_ptr<Call>& record);
  std::optional<size_t> acquire();  // a free worker not stuck; nullopt when every one is stuck
  void release(size_t worker);
  ResolvedPlugin plugin_;
  std::unique_ptr<HostServices> services_;
  grpo_multiturn_api api_{};  // zero-filled beyond what the plugin provides
  grpo_multiturn_instance* instance_ = nullptr;
  std::string tools_;
  std::atomic<long> failures_{0};
  double timeout_s_ = 0;
  // Every call after create runs on one of these, with its deadline: one
  // worker, or several for a thread-safe handler.
  std::vector<std::unique_ptr<CallWorker>> workers_;
  std::mutex pool_mutex_;
  std::condition_variable pool_changed_;
  std::vector<size_t> idle_;  // workers no call is running on
};

}  // namespace grpo::plugins
