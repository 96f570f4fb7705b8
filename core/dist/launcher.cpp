#include "dist/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

#include <spdlog/spdlog.h>

namespace grpo::dist {

namespace {

std::atomic<int> g_forward_signal{0};
extern "C" void remember_signal(int sig) { g_forward_signal = sig; }

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool running = true;
  int status = 0;
};

std::string describe(int status) {
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
                                  strsignal(WTERMSIG(status)) + ")";
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

int exit_code(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

pid_t start_rank(const LaunchRequest& r, int port, int local_rank, const std::vector<std::string>& argv) {
  const int rank = r.node_rank * r.nproc_per_node + local_rank;
  std::vector<std::string> env_pairs = {
      "RANK=" + std::to_string(rank),
      "WORLD_SIZE=" + std::to_string(r.world_size()),
      "LOCAL_RANK=" + std::to_string(local_rank),
      "LOCAL_WORLD_SIZE=" + std::to_string(r.nproc_per_node),
      "NODE_RANK=" + std::to_string(r.node_rank),
      "MASTER_ADDR=" + r.master_addr,
      "MASTER_PORT=" + std::to_string(port),
  };
  std::vector<char*> args;
  std::string self = "/proc/self/exe";
  args.push_back(const_cast<char*>(argv.empty() ? self.c_str() : argv[0].c_str()));
  for (size_t i = 1; i < argv.size(); ++i) args.push_back(const_cast<char*>(argv[i].c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("could not start rank ") + std::to_string(rank) + ": " + strerror(errno));
  if (pid == 0) {
    for (const std::string& kv : env_pairs) putenv(const_cast<char*>(kv.c_str()));
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    execv("/proc/self/exe", args.data());
    std::fprintf(stderr, "could not start rank %d: exec of /proc/self/exe failed: %s\n", rank, strerror(errno));
    _exit(127);
  }
  return pid;
}

void signal_all(std::vector<Child>& children, int sig) {
  for (Child& c : children)
    if (c.running) {
      kill(c.pid, sig);
      if (sig == SIGTERM) kill(c.pid, SIGCONT);  // a stopped rank must run to see it
    }
}

}  // namespace

int free_port(const std::string& host) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket(): ") + strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = strerror(errno);
    close(fd);
    throw std::runtime_error("could not find a free port on " + host + " for MASTER_PORT: " + why +
                             "; set MASTER_PORT");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

int launch_ranks(const LaunchRequest& r, const std::vector<std::string>& argv, double grace_s) {
  const int port = r.master_port.value_or(r.nnodes == 1 ? free_port(r.master_addr) : 29500);
  spdlog::info("starting {} ranks on node {} of {} (world size {}), rank 0 at {}:{}", r.nproc_per_node, r.node_rank,
               r.nnodes, r.world_size(), r.master_addr, port);
  struct sigaction sa {};
  sa.sa_handler = remember_signal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {}, old_term {};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  std::vector<Child> children;
  for (int local = 0; local < r.nproc_per_node; ++local)
    children.push_back({r.node_rank * r.nproc_per_node + local, start_rank(r, port, local, argv)});

  int result = 0;
  bool stopping = false;
  auto stop_deadline = std::chrono::steady_clock::time_point::max();
  size_t running = children.size();
  while (running > 0) {
    if (int sig = g_forward_signal.exchange(0)) {
      spdlog::warn("launcher: got signal {}, passing it to every rank", sig);
      signal_all(children, sig);
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (Child& c : children) {
        if (c.pid != pid || !c.running) continue;
        c.running = false;
        c.status = status;
        --running;
        const bool failed = exit_code(status) != 0;
        if (failed && result == 0) result = exit_code(status);
        if (failed && !stopping) {
          spdlog::error("launcher: rank {} (pid {}) {}; stopping the other ranks", c.rank, c.pid, describe(status));
          stopping = true;
          stop_deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1000));
          signal_all(children, SIGTERM);
        } else if (failed) {
          spdlog::warn("launcher: rank {} (pid {}) {}", c.rank, c.pid, describe(status));
        }
      }
      continue;
    }
    if (pid < 0 && errno != EINTR) break;
    if (stopping && std::chrono::steady_clock::now() > stop_deadline) {
      for (Child& c : children)
        if (c.running) spdlog::error("launcher: rank {} (pid {}) did not stop within {:.0f} s: killing it", c.rank, c.pid, grace_s);
      signal_all(children, SIGKILL);
      stop_deadline = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return result;
}

}  // namespace grpo::dist
