// One thread that runs a plugin instance's calls one at a time, each waited
// for up to a deadline: how the host survives an in-process plugin that
// hangs. A call past its deadline is abandoned, not killed — it keeps the
// worker (and whatever it holds) until it returns — and until it does, every
// later call fails at once instead of queueing behind it.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace grpo::plugins {

class CallWorker {
 public:
  CallWorker();
  // Joins the thread, or detaches it when a call is still stuck (its
  // instance must then be leaked, not destroyed under it).
  ~CallWorker();
  CallWorker(const CallWorker&) = delete;
  CallWorker& operator=(const CallWorker&) = delete;

  // Runs `call` on the worker and waits up to timeout_s seconds (<= 0:
  // without limit). False when it did not return in time, or when an
  // earlier call still has not: `call` then owns everything it touches.
  bool run(std::function<void()> call, double timeout_s);
  // Whether an abandoned call is still running.
  bool stuck();

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool busy_ = false, quit_ = false;
  bool abandoned_ = false;  // a call outlived its deadline and is not back yet
  std::thread thread_;
};

}  // namespace grpo::plugins
