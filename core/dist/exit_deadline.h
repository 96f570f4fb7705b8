// A last resort against a hang: ends the process, saying why, when a call
// that no timeout reaches and nothing can cancel has not returned in time.
// NCCL forming a communicator is one (ncclCommInitRank blocks until every
// rank's bootstrap connects, and a rank on an interface the others cannot
// reach leaves it waiting for ever); the process is better ended with the
// reason than left waiting.
//
//   { ExitDeadline d(timeout, "joining the NCCL group ... did not finish"); connect(); }
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace grpo::dist {

class ExitDeadline {
 public:
  // Unless destroyed within `limit`, logs `message` (with the limit) and
  // exits with status 1.
  ExitDeadline(std::chrono::milliseconds limit, std::string message);
  ~ExitDeadline();
  ExitDeadline(const ExitDeadline&) = delete;
  ExitDeadline& operator=(const ExitDeadline&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable done_changed_;
  bool done_ = false;
  std::thread watcher_;
};

}  // namespace grpo::dist
