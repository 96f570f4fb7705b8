// grpo-plugin-worker: one reward plugin in a process of its own, driven by
// grpo-host over fds 3 and 4 (--plugin_isolation process). Not for users.
#include "plugins/crash_guard.h"
#include "plugins/reward_worker.h"

int main() {
  grpo::plugins::install_crash_handlers();  // a crash names the plugin in the log, then the host restarts us
  return grpo::plugins::run_reward_worker(3, 4, 5);
}
