#include "plugins/worker_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "plugins/wire.h"

extern char** environ;

namespace grpo::plugins {

namespace {

// The child reads requests on fd 3, answers on fd 4 and finds each batch in
// the shared memory at fd 5; its stdout and stderr stay the host's unless
// the caller gives a stdout, so what a plugin prints cannot corrupt the stream.
constexpr int kChildIn = 3, kChildOut = 4, kChildBatch = 5;

}  // namespace

std::string plugin_worker_path(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* env = std::getenv("GRPO_PLUGIN_WORKER"); env && *env) return env;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / "grpo-plugin-worker").string();
}

int WorkerProcess::start(const std::string& exe, int batch_fd, int stdout_fd) {
  stop();
  // Every descriptor is close-on-exec; the child's ends are first moved above
  // 10, so that the dup2s onto 3, 4 and 5 cannot clobber each other.
  int down[2], up[2];  // host -> child, child -> host
  if (::pipe2(down, O_CLOEXEC) != 0) return errno;
  if (::pipe2(up, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(down[0]);
    ::close(down[1]);
    return err;
  }
  const int child_in = ::fcntl(down[0], F_DUPFD_CLOEXEC, 10), child_out = ::fcntl(up[1], F_DUPFD_CLOEXEC, 10);
  const int child_batch = batch_fd >= 0 ? ::fcntl(batch_fd, F_DUPFD_CLOEXEC, 10) : -1;
  const int child_stdout = stdout_fd >= 0 ? ::fcntl(stdout_fd, F_DUPFD_CLOEXEC, 10) : -1;
  ::close(down[0]);
  ::close(up[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, child_in, kChildIn);
  posix_spawn_file_actions_adddup2(&actions, child_out, kChildOut);
  if (child_batch >= 0) posix_spawn_file_actions_adddup2(&actions, child_batch, kChildBatch);
  if (child_stdout >= 0) posix_spawn_file_actions_adddup2(&actions, child_stdout, STDOUT_FILENO);
  // A process group of its own: Ctrl-C at a terminal reaches the host alone
  // (which stops the worker itself), and killing the group also ends the
  // helpers a plugin started.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  char* argv[] = {const_cast<char*>(exe.c_str()), nullptr};
  const int rc = ::posix_spawn(&pid_, exe.c_str(), &actions, &attr, argv, environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  for (int fd : {child_in, child_out, child_batch, child_stdout})
    if (fd >= 0) ::close(fd);
  to_child_ = down[1];
  from_child_ = up[0];
  if (rc != 0) {
    pid_ = -1;
    stop();
  }
  return rc;
}

void WorkerProcess::stop() {
  if (to_child_ >= 0) ::close(to_child_);
  if (from_child_ >= 0) ::close(from_child_);
  to_child_ = from_child_ = -1;
  if (pid_ > 0) {
    kill_group();
    ::waitpid(pid_, nullptr, 0);
  }
  pid_ = -1;
}

void WorkerProcess::kill_group() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);  // with the helpers its plugin started
  ::kill(pid_, SIGKILL);   // should the plugin have left the group
}

bool WorkerProcess::exited_and_drained() const {
  if (pid_ <= 0) return true;
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != pid_)
    return false;
  pollfd unread{from_child_, POLLIN, 0};
  return ::poll(&unread, 1, 0) <= 0 || !(unread.revents & POLLIN);
}

std::string WorkerProcess::reap(int64_t grace_ms) {
  if (pid_ <= 0) return "its worker process is gone";
  // Waited for without reaping (WNOWAIT), so that its group is killed while
  // the ids are still its own.
  const int64_t until = now_ms() + grace_ms;
  siginfo_t info{};
  for (;;) {
    info.si_pid = 0;
    if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == pid_ ||
        now_ms() >= until)
      break;
    const timespec pause{0, 10'000'000};
    ::nanosleep(&pause, nullptr);
  }
  const bool killed = info.si_pid != pid_;
  kill_group();
  int status = 0;
  const pid_t got = ::waitpid(pid_, &status, 0);
  pid_ = -1;
  if (killed) return "its worker process closed its reply pipe but went on running, and was killed";
  if (got > 0 && WIFSIGNALED(status))
    return fmt::format("its worker process died of signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  if (got > 0 && WIFEXITED(status)) return fmt::format("its worker process exited with status {}", WEXITSTATUS(status));
  return "its worker process is gone";
}

}  // namespace grpo::plugins
