// grpo-plugin-worker: a plugin in a process of its own, driven by grpo-host
// over fds 3 and 4: one reward plugin for --plugin_isolation process, or one
// check of `grpo-host plugins --check`. Not for users.
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "plugins/conformance.h"
#include "plugins/crash_guard.h"
#include "plugins/reward_worker.h"
#include "plugins/wire.h"

int main() {
  using namespace grpo::plugins;
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
