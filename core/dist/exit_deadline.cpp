#include "dist/exit_deadline.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>

namespace grpo::dist {

ExitDeadline::ExitDeadline(std::chrono::milliseconds limit, std::string message)
    : watcher_([this, limit, message = std::move(message)] {
        std::unique_lock<std::mutex> lock(mutex_);
        if (done_changed_.wait_for(lock, limit, [this] { return done_; })) return;
        spdlog::critical("{} (not finished after {:.1f} s; exiting)", message,
                         static_cast<double>(limit.count()) / 1000.0);
        spdlog::shutdown();
        std::fflush(nullptr);
        std::_Exit(1);  // the stuck call holds locks and threads no orderly exit could wait for
      }) {}

ExitDeadline::~ExitDeadline() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  done_changed_.notify_all();
  watcher_.join();
}

}  // namespace grpo::dist
