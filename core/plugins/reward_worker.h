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

// Byte streams for the protocol: length-prefixed strings, little-endian numbers.
class Wire {
 public:
  explicit Wire(int fd) : fd_(fd) {}
  void put(const std::string& s);
  void put_u64(uint64_t v);
  void put_i64(int64_t v) { put_u64(static_cast<uint64_t>(v)); }
  void put_f64(double v);
  void flush();  // throws std::runtime_error when the other side is gone
  std::string take();  // what was put and not flushed; the buffer is then empty
  bool buffered() const { return in_pos_ < in_.size(); }  // bytes read ahead and not yet consumed
  // Checked while a read waits: true ends it with std::runtime_error("interrupted").
  void interrupt_when(std::function<bool()> fn) { interrupt_ = std::move(fn); }
  // Reads block until `deadline_ms` (< 0: forever); throws std::runtime_error
  // on end of stream, with "timeout" when the deadline passed. A string
  // longer than `max_bytes` is an error before anything is allocated.
  std::string get_string(int64_t deadline_ms = -1, uint64_t max_bytes = UINT64_MAX);
  uint64_t get_u64(int64_t deadline_ms = -1);
  int64_t get_i64(int64_t deadline_ms = -1) { return static_cast<int64_t>(get_u64(deadline_ms)); }
  double get_f64(int64_t deadline_ms = -1);

 private:
  void read_exact(void* out, size_t n, int64_t deadline_ms);
  int fd_;
  std::function<bool()> interrupt_;
  std::string out_;
  std::string in_;  // read ahead; in_[in_pos_..] not yet consumed
  size_t in_pos_ = 0;
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
  void stop();   // kills the child, if any
  // Reaps the child, killing it (and its process group) unless it exits
  // within `grace_ms` of its own; says why it is gone.
  std::string reap(int64_t grace_ms);
  void kill_group();
  class SharedCore;
  PluginInfo info_;
  std::string options_json_, run_config_json_, tokenizer_dir_;
  tok::ChatFamily family_;
  Isolation isolation_;
  SharedMemory batch_;  // kept across restarts; each child maps it
  pid_t pid_ = -1;
  // Every reply names the worker's token (random, sent when it starts) and
  // the batch's number: a reply a plugin wrote on the pipe itself, or one
  // meant for an earlier batch, is told apart and fails its batch.
  uint64_t token_ = 0, sequence_ = 0;
  int to_child_ = -1, from_child_ = -1;
};

// grpo-plugin-worker: serves one reward plugin until the host closes in_fd;
// batches arrive in the shared memory at shm_fd.
int run_reward_worker(int in_fd, int out_fd, int shm_fd);

}  // namespace grpo::plugins
