// grpo-plugin-worker: a plugin in a process of its own, driven by grpo-host
// over fds 3 and 4: one reward plugin for --plugin_isolation process, or one
// check of `grpo-host plugins --check`. Not for users.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "plugins/conformance.h"
#include "plugins/crash_guard.h"
#include "plugins/reward_worker.h"
#include "plugins/wire.h"

namespace {

// A worker outlives a grpo-host killed with SIGKILL (or one that crashed)
// only while its plugin is busy: an idle worker sees its command pipe end.
// This thread ends the busy ones too, with the helpers they started, once
// the worker is reparented. (PR_SET_PDEATHSIG would fire when the host's
// thread that started the worker ends, not the host.)
void exit_with_the_host() {
  const pid_t host = ::getppid();
  std::thread([host] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      if (::getppid() != host) ::kill(0, SIGKILL);  // our process group: the worker and its helpers
    }
  }).detach();
}

}  // namespace

int main() {
  using namespace grpo::plugins;
  exit_with_the_host();
  install_crash_handlers();  // a crash names the plugin in the log, then the host restarts us
  // The host reads this process's stderr as its own log; stdout is left to
  // the host too (the checker gives it a file of its own, to see what a plugin prints).
  spdlog::set_default_logger(spdlog::stderr_logger_mt("grpo-plugin-worker"));
  Wire in(3), out(4);
  uint64_t magic = 0;
  try {
    magic = in.get_u64();
  } catch (const std::exception&) {
    return 2;
  }
  if (magic == kRewardWorkerMagic) return serve_reward_plugin(in, out, 5);
  if (magic == kCheckWorkerMagic) return serve_plugin_check(in, out);
  return 2;
}
