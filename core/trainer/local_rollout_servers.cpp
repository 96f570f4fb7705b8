#include "trainer/local_rollout_servers.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

extern char** environ;

namespace grpo::trainer {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// grpo-rollout beside this program (both are installed, and built, in one bin directory).
std::string rollout_exe() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const fs::path exe = self.parent_path() / "grpo-rollout";
  if (ec || !fs::exists(exe))
    throw std::runtime_error(fmt::format("--num_infer_workers starts grpo-rollout, which is not beside {} ({}); "
                                         "install both, or start the servers yourself and give --vllm_server_host",
                                         self.string(), exe.string()));
  return exe.string();
}

std::string log_tail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  return all.size() > 1500 ? "..." + all.substr(all.size() - 1500) : all;
}

}  // namespace

std::vector<std::string> rollout_server_devices(const c10::Device& training, int visible_gpus, int local_size,
                                                int64_t count) {
  std::vector<std::string> out;
  const int free_from = local_size, free = visible_gpus - local_size;
  for (int64_t i = 0; i < count; ++i) {
    if (!training.is_cuda() || visible_gpus < 1) out.emplace_back("cpu");
    else if (free > 0) out.push_back("cuda:" + std::to_string(free_from + static_cast<int>(i % free)));
    else out.push_back("cuda:" + std::to_string(static_cast<int>(i % std::min(local_size, visible_gpus))));
  }
  return out;
}

LocalRolloutServers::LocalRolloutServers(const LocalServerOptions& o) {
  const std::string exe = rollout_exe();
  fs::create_directories(o.log_dir);
  // Each server exits with this process (PR_SET_PDEATHSIG, set by grpo-rollout itself).
  const std::string parent = "GRPO_ROLLOUT_EXIT_WITH_PARENT=" + std::to_string(::getpid());
  std::vector<char*> env;
  for (char** e = environ; *e; ++e)
    if (std::string_view(*e).rfind("GRPO_ROLLOUT_EXIT_WITH_PARENT=", 0) != 0) env.push_back(*e);
  env.push_back(const_cast<char*>(parent.c_str()));
  env.push_back(nullptr);
  try {
    for (int64_t i = 0; i < o.count; ++i) {
      Server server;
      server.log = (fs::path(o.log_dir) / fmt::format("rollout_server_{}.log", i)).string();
      int out[2];
      if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe(): " + std::string(strerror(errno)));
      server.stdout_fd = out[0];
      // Loopback: every rank reaches them at 127.0.0.1 (ports(), and the trainer's URLs).
      const std::string device = static_cast<size_t>(i) < o.devices.size() ? o.devices[static_cast<size_t>(i)] : "cpu";
      const std::vector<std::string> args = {exe, "--model", o.model_dir, "--host", "127.0.0.1", "--port", "0",
                                             "--torch_dtype", o.torch_dtype, "--device", device, "--num_threads",
                                             std::to_string(o.threads_each), "--max_num_seqs",
                                             std::to_string(o.max_num_seqs), "--gpu_memory_utilization",
                                             fmt::format("{}", o.gpu_memory_utilization), "--enforce_eager",
                                             o.enforce_eager ? "true" : "false"};
      std::vector<char*> argv;
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      posix_spawn_file_actions_t actions;
      posix_spawn_file_actions_init(&actions);
      posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
      posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, server.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      // Its own process group: a terminal's Ctrl-C reaches the trainer, which stops them in order.
      posix_spawnattr_t attr;
      posix_spawnattr_init(&attr);
      posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
      posix_spawnattr_setpgroup(&attr, 0);
      const int rc = ::posix_spawn(&server.pid, exe.c_str(), &actions, &attr, argv.data(), env.data());
      posix_spawnattr_destroy(&attr);
      posix_spawn_file_actions_destroy(&actions);
      ::close(out[1]);
      if (rc != 0) {
        ::close(server.stdout_fd);
        throw std::runtime_error(fmt::format("could not start {}: {}", exe, strerror(rc)));
      }
      servers_.push_back(server);
    }
    // Each prints "grpo-rollout listening on http://HOST:PORT/" once its model is loaded.
    const std::regex listening(R"(listening on (http://[^ ]+:([0-9]+))/?\s*$)");
    for (size_t i = 0; i < servers_.size(); ++i) {
      const Server& server = servers_[i];
      const auto deadline = Clock::now() + std::chrono::duration<double>(o.start_timeout_s);
      std::string line;
      std::smatch m;
      while (!std::regex_search(line, m, listening)) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        int status = 0;
        if (::waitpid(server.pid, &status, WNOHANG) == server.pid) {
          servers_[i].pid = -1;
          throw std::runtime_error(fmt::format("rollout server {} of {} exited before it listened ({}):\n{}", i + 1,
                                               servers_.size(), server.log, log_tail(server.log)));
        }
        if (left <= 0)
          throw std::runtime_error(fmt::format("rollout server {} of {} did not listen within {:g} s "
                                               "(--vllm_server_timeout); its log {}:\n{}",
                                               i + 1, servers_.size(), o.start_timeout_s, server.log,
                                               log_tail(server.log)));
        pollfd p{server.stdout_fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 200))) > 0) {
          char buffer[512];
          const ssize_t n = ::read(server.stdout_fd, buffer, sizeof buffer);
          if (n > 0) line.append(buffer, static_cast<size_t>(n));
          else std::this_thread::sleep_for(std::chrono::milliseconds(50));  // closed: waitpid above says why
        }
      }
      ports_.push_back(std::stoi(m[2].str()));
      spdlog::info("rollout server {} of {} listens at {} (pid {}, log {})", i + 1, servers_.size(), m[1].str(),
                   server.pid, server.log);
    }
  } catch (...) {
    stop_all();
    throw;
  }
}

LocalRolloutServers::~LocalRolloutServers() { stop_all(); }

void LocalRolloutServers::stop_all() {
  for (Server& s : servers_)
    if (s.pid > 0) ::kill(s.pid, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  for (Server& s : servers_) {
    while (s.pid > 0) {
      int status = 0;
      if (::waitpid(s.pid, &status, WNOHANG) == s.pid) {
        s.pid = -1;
      } else if (Clock::now() > deadline) {
        ::kill(s.pid, SIGKILL);
        ::waitpid(s.pid, &status, 0);
        s.pid = -1;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    if (s.stdout_fd >= 0) ::close(s.stdout_fd);
    s.stdout_fd = -1;
  }
}

}  // namespace grpo::trainer
