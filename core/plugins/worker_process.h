// One grpo-plugin-worker child process: spawned with its request pipe on fd 3,
// its reply pipe on fd 4 and, when given, a shared batch on fd 5 and a file of
// our choosing as its stdout; in a process group of its own. Used by the
// isolated reward (RewardWorker) and by the conformance checker, which runs
// each check that calls into a plugin in one of these.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace grpo::plugins {

// `configured` when set, else $GRPO_PLUGIN_WORKER, else grpo-plugin-worker
// beside this executable.
std::string plugin_worker_path(const std::string& configured);

class WorkerProcess {
 public:
  WorkerProcess() = default;
  ~WorkerProcess() { stop(); }
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Spawns `exe`. `batch_fd` (fd 5 in the child) and `stdout_fd` (its fd 1)
  // are left out when < 0. Returns 0, or the errno of a failed spawn (the
  // process is then not running).
  int start(const std::string& exe, int batch_fd = -1, int stdout_fd = -1);
  // Kills the child and its group, if any, and closes the pipes.
  void stop();
  // Reaps the child, killing it (and its process group) unless it exits
  // within `grace_ms` of its own; says why it is gone ("its worker process
  // died of signal 11 (Segmentation fault)", "... exited with status 3").
  std::string reap(int64_t grace_ms);
  // SIGKILL to the child's group and to the child; only while it is not yet
  // reaped, so that its ids cannot belong to another process.
  void kill_group();

  // Whether the child has exited and left nothing more to read on its reply
  // pipe, without reaping it (reap() still says why). A helper the plugin
  // forked may hold the pipe open after the child died: readers watch for
  // this, not only for the pipe's end.
  bool exited_and_drained() const;
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  int to_child() const { return to_child_; }
  int from_child() const { return from_child_; }

 private:
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
};

}  // namespace grpo::plugins
