#include "plugins/call_worker.h"

#include <chrono>
#include <future>
#include <memory>

namespace grpo::plugins {

CallWorker::CallWorker() : thread_([this] { loop(); }) {}

CallWorker::~CallWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  if (stuck()) thread_.detach();
  else thread_.join();
}

void CallWorker::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return quit_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // quit, nothing left
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    busy_ = true;
    lock.unlock();
    job();
    lock.lock();
    busy_ = false;
    if (jobs_.empty()) abandoned_ = false;  // whatever was abandoned has returned
  }
}

bool CallWorker::stuck() {
  std::lock_guard<std::mutex> lock(mu_);
  return abandoned_ && (busy_ || !jobs_.empty());
}

bool CallWorker::run(std::function<void()> call, double timeout_s) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (abandoned_ && (busy_ || !jobs_.empty())) return false;
    abandoned_ = false;
    jobs_.push_back([call = std::move(call), done] {
      call();
      done->set_value();
    });
  }
  cv_.notify_all();
  if (timeout_s <= 0) {
    finished.wait();
    return true;
  }
  if (finished.wait_for(std::chrono::duration<double>(timeout_s)) == std::future_status::ready) return true;
  std::lock_guard<std::mutex> lock(mu_);
  abandoned_ = true;
  return false;
}

}  // namespace grpo::plugins
