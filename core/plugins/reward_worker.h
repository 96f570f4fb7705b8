// A reward plugin in a child process (`--plugin_isolation process`): the
// grpo-plugin-worker executable loads the library and scores; the host writes
// each batch into shared memory and says so over a pipe. A crash, or a call past the timeout, costs that
// batch (NaN) and a restart of the child — never the training run.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <grpo/reward.h>
#include <nlohmann/json.hpp>

#include "plugins/plugin_library.h"
#include "plugins/reward_input.h"
#include "plugins/shared_batch.h"
#include "plugins/wire.h"
#include "plugins/worker_process.h"
#include "tokenizer/chat_template.h"

namespace grpo::plugins {

struct Isolation {
  bool process = false;   // score in a child process
  double timeout_s = 0;   // > 0: a score() call that takes longer is killed
  std::string worker_exe; // "" = grpo-plugin-worker beside this executable (or $GRPO_PLUGIN_WORKER)
  // Asked every 50 ms while a reply is awaited: true kills the worker and
  // throws ScoreInterrupted (train sets it once a stop signal's grace is over).
  std::function<bool()> give_up;
};

// score() was given up on Isolation::give_up; the worker is gone, the batch unscored.
class ScoreInterrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct WireReply {
  std::vector<double> rewards;
  bool failed = false;
  std::string error;
  std::vector<std::pair<std::string, double>> metrics;
};

class RewardWorker {
 public:
  // Starts the child and creates the plugin's instance there; throws
  // PluginError with the plugin's message when it cannot be created.
  // `tokenizer_dir` (may be empty): the worker loads the run's tokenizer from
  // there for the text services, to be used with chat format `family`.
  RewardWorker(const PluginInfo& info, const nlohmann::json& options, std::string run_config_json,
               Isolation isolation, std::string tokenizer_dir = "", tok::ChatFamily family = tok::ChatFamily::ChatML);
  ~RewardWorker();
  RewardWorker(const RewardWorker&) = delete;
  RewardWorker& operator=(const RewardWorker&) = delete;

  // Scores one batch. On a crash or timeout the child is killed and
  // restarted for the next call; the reply is `failed` with the reason.
  WireReply score(const std::vector<RewardView>& rows, const TrainerState& state);

 private:
  void start();  // spawn + init; throws PluginError when create() fails
  class SharedCore;
  PluginInfo info_;
  std::string options_json_, run_config_json_, tokenizer_dir_;
  tok::ChatFamily family_;
  Isolation isolation_;
  SharedMemory batch_;  // kept across restarts; each child maps it
  WorkerProcess process_;
  // Every reply names the worker's token (random, sent when it starts) and
  // the batch's number: a reply a plugin wrote on the pipe itself, or one
  // meant for an earlier batch, is told apart and fails its batch.
  uint64_t token_ = 0, sequence_ = 0;
};

// grpo-plugin-worker, once it has read kRewardWorkerMagic: serves one reward
// plugin until the host closes `in`; batches arrive in the shared memory at shm_fd.
int serve_reward_plugin(Wire& in, Wire& out, int shm_fd);

}  // namespace grpo::plugins
