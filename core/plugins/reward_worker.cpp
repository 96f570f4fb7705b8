#include "plugins/reward_worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "plugins/plugin_error.h"
#include "plugins/plugin_registry.h"
#include "plugins/reward_function.h"

extern char** environ;

namespace grpo::plugins {

namespace {

// The child reads requests on fd 3 and answers on fd 4; its stdout and
// stderr stay the host's, so what a plugin prints cannot corrupt the stream.
constexpr int kChildIn = 3, kChildOut = 4;
constexpr uint64_t kMagic = 0x67727030726577ull;  // "grp0rew"

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string worker_path(const Isolation& isolation) {
  if (!isolation.worker_exe.empty()) return isolation.worker_exe;
  if (const char* env = std::getenv("GRPO_PLUGIN_WORKER"); env && *env) return env;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / "grpo-plugin-worker").string();
}

}  // namespace

void Wire::put(const std::string& s) {
  put_u64(s.size());
  out_ += s;
}

void Wire::put(const std::vector<int32_t>& v) {
  put_u64(v.size());
  out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int32_t));
}

void Wire::put_u64(uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }

void Wire::put_f64(double v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }

void Wire::flush() {
  size_t done = 0;
  while (done < out_.size()) {
    const ssize_t n = ::write(fd_, out_.data() + done, out_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("the other end of the pipe is gone");
    done += static_cast<size_t>(n);
  }
  out_.clear();
}

// Fields are served from a buffer filled by large reads: one syscall per
// field (a batch of 64 has about a thousand) cost more than the scoring of
// cheap rewards.
void Wire::read_exact(void* out, size_t n, int64_t deadline_ms) {
  char* p = static_cast<char*>(out);
  while (n > 0) {
    if (in_pos_ < in_.size()) {
      const size_t take = std::min(n, in_.size() - in_pos_);
      std::memcpy(p, in_.data() + in_pos_, take);
      in_pos_ += take;
      p += take;
      n -= take;
      continue;
    }
    if (deadline_ms >= 0) {
      pollfd pfd{fd_, POLLIN, 0};
      const int64_t left = deadline_ms - now_ms();
      const int ready = left <= 0 ? 0 : ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, INT_MAX)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) throw std::runtime_error("timeout");
    }
    in_.resize(std::max<size_t>(n, 1 << 16));
    in_pos_ = 0;
    const ssize_t got = ::read(fd_, in_.data(), in_.size());
    if (got < 0 && errno == EINTR) {
      in_.clear();
      continue;
    }
    if (got <= 0) {
      in_.clear();
      throw std::runtime_error("end of stream");
    }
    in_.resize(static_cast<size_t>(got));
  }
}

uint64_t Wire::get_u64(int64_t deadline_ms) {
  uint64_t v = 0;
  read_exact(&v, sizeof v, deadline_ms);
  return v;
}

double Wire::get_f64(int64_t deadline_ms) {
  double v = 0;
  read_exact(&v, sizeof v, deadline_ms);
  return v;
}

std::string Wire::get_string(int64_t deadline_ms) {
  std::string s(get_u64(deadline_ms), '\0');
  read_exact(s.data(), s.size(), deadline_ms);
  return s;
}

std::vector<int32_t> Wire::get_ids(int64_t deadline_ms) {
  std::vector<int32_t> v(get_u64(deadline_ms));
  read_exact(v.data(), v.size() * sizeof(int32_t), deadline_ms);
  return v;
}

void write_sample(Wire& w, const WireSample& s) {
  w.put(s.messages_json);
  w.put(s.completion);
  w.put(s.columns_json);
  w.put(s.conversation_json);
  w.put_u64(s.has_ids);
  w.put(s.ids);
  w.put_i64(s.tokens);
  w.put_u64(s.truncated);
  w.put_i64(s.prompt_index);
  w.put_u64(s.column_names.size());
  for (size_t i = 0; i < s.column_names.size(); ++i) {
    w.put(s.column_names[i]);
    w.put(s.column_json[i]);
    w.put(s.column_text[i]);
  }
}

WireSample read_sample(Wire& w) {
  WireSample s;
  s.messages_json = w.get_string();
  s.completion = w.get_string();
  s.columns_json = w.get_string();
  s.conversation_json = w.get_string();
  s.has_ids = w.get_u64() != 0;
  s.ids = w.get_ids();
  s.tokens = w.get_i64();
  s.truncated = w.get_u64() != 0;
  s.prompt_index = w.get_i64();
  const uint64_t n = w.get_u64();
  for (uint64_t i = 0; i < n; ++i) {
    s.column_names.push_back(w.get_string());
    s.column_json.push_back(w.get_string());
    s.column_text.push_back(w.get_string());
  }
  return s;
}

RewardWorker::RewardWorker(const PluginInfo& info, const nlohmann::json& options, std::string run_config_json,
                           Isolation isolation)
    : info_(info), options_json_(options.dump()), run_config_json_(std::move(run_config_json)),
      isolation_(std::move(isolation)) {
  ::signal(SIGPIPE, SIG_IGN);  // a child that died is a failed write, not the host's death
  start();
}

RewardWorker::~RewardWorker() { stop(); }

void RewardWorker::start() {
  // Every descriptor is close-on-exec; the child's two ends are first moved
  // above 3 and 4, so that the dup2s onto 3 and 4 cannot clobber each other.
  int down[2], up[2];  // host -> child, child -> host
  if (::pipe2(down, O_CLOEXEC) != 0 || ::pipe2(up, O_CLOEXEC) != 0)
    throw PluginError("cannot create pipes for the plugin worker");
  // A batch (hundreds of kB) in one pipe buffer: the child wakes once per
  // batch instead of once per 64 kB. Best effort: the default works too.
  ::fcntl(down[1], F_SETPIPE_SZ, 1 << 20);
  const int child_in = ::fcntl(down[0], F_DUPFD_CLOEXEC, 10), child_out = ::fcntl(up[1], F_DUPFD_CLOEXEC, 10);
  ::close(down[0]);
  ::close(up[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, child_in, kChildIn);
  posix_spawn_file_actions_adddup2(&actions, child_out, kChildOut);
  const std::string exe = worker_path(isolation_);
  char* argv[] = {const_cast<char*>(exe.c_str()), nullptr};
  const int rc = ::posix_spawn(&pid_, exe.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(child_in);
  ::close(child_out);
  to_child_ = down[1];
  from_child_ = up[0];
  if (rc != 0) {
    stop();
    throw PluginError(fmt::format("cannot start the plugin worker {} for '{}': {} (it is installed beside "
                                  "grpo-host; set GRPO_PLUGIN_WORKER to its path)",
                                  exe, info_.name, std::strerror(rc)));
  }
  Wire out(to_child_), in(from_child_);
  out.put_u64(kMagic);
  out.put(info_.file);
  out.put(info_.name);
  out.put(options_json_);
  out.put(run_config_json_);
  std::string error;
  try {
    out.flush();
    if (in.get_u64() != 0) return;  // created
    error = in.get_string();
  } catch (const std::exception&) {
    error = died();
  }
  stop();
  throw PluginError(fmt::format("reward plugin '{}' ({}) could not be created in its worker process: {}", info_.name,
                                info_.file, error));
}

void RewardWorker::stop() {
  if (to_child_ >= 0) ::close(to_child_);
  if (from_child_ >= 0) ::close(from_child_);
  to_child_ = from_child_ = -1;
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_ = -1;
}

std::string RewardWorker::died() {
  int status = 0;
  if (pid_ > 0 && ::waitpid(pid_, &status, 0) == pid_) {
    pid_ = -1;
    if (WIFSIGNALED(status)) return fmt::format("its worker process died of signal {} ({})", WTERMSIG(status),
                                                strsignal(WTERMSIG(status)));
    if (WIFEXITED(status)) return fmt::format("its worker process exited with status {}", WEXITSTATUS(status));
  }
  return "its worker process is gone";
}

WireReply RewardWorker::score(const std::vector<WireSample>& samples, const grpo_trainer_state& state) {
  WireReply reply;
  try {
    if (pid_ < 0) start();  // restarted after a crash or a timeout
  } catch (const std::exception& e) {
    reply.failed = true;
    reply.error = e.what();
    return reply;
  }
  Wire out(to_child_), in(from_child_);
  out.put_u64(samples.size());
  for (const WireSample& s : samples) write_sample(out, s);
  out.put_i64(state.global_step);
  out.put_i64(state.max_steps);
  out.put_f64(state.epoch);
  const int64_t deadline = isolation_.timeout_s > 0 ? now_ms() + static_cast<int64_t>(isolation_.timeout_s * 1000) : -1;
  try {
    out.flush();
    const uint64_t n = in.get_u64(deadline);
    for (uint64_t i = 0; i < n; ++i) reply.rewards.push_back(in.get_f64(deadline));
    reply.failed = in.get_u64(deadline) != 0;
    reply.error = in.get_string(deadline);
    const uint64_t metrics = in.get_u64(deadline);
    for (uint64_t i = 0; i < metrics; ++i) {
      std::string name = in.get_string(deadline);
      reply.metrics.emplace_back(std::move(name), in.get_f64(deadline));
    }
  } catch (const std::exception& e) {
    const bool timeout = std::string(e.what()) == "timeout";
    if (timeout) ::kill(pid_, SIGKILL);
    const std::string why = died();
    stop();
    reply = {};
    reply.failed = true;
    reply.error = timeout ? fmt::format("score() did not answer within {} s (--reward_timeout); its worker process "
                                        "was killed and starts again for the next batch",
                                        isolation_.timeout_s)
                          : why + " inside score(); it starts again for the next batch";
  }
  return reply;
}

int run_reward_worker(int in_fd, int out_fd) {
  // The host reads this process's stdout and stderr as its own log.
  spdlog::set_default_logger(spdlog::stderr_logger_mt("grpo-plugin-worker"));
  Wire in(in_fd), out(out_fd);
  std::unique_ptr<RewardFunction> fn;
  auto metrics = std::make_shared<MetricsSink>();
  try {
    if (in.get_u64() != kMagic) return 2;
    const std::string library = in.get_string(), name = in.get_string();
    const nlohmann::json options = nlohmann::json::parse(in.get_string());
    const std::string run_config = in.get_string();
    try {
      PluginSources sources;
      sources.files = {library};
      sources.use_env = false;
      sources.use_builtin = false;
      const PluginRegistry registry = PluginRegistry::discover(sources);
      fn = RewardFunction::create(registry.require(name, GRPO_REWARD_INTERFACE), options, metrics, run_config, 1);
      out.put_u64(1);
    } catch (const std::exception& e) {
      out.put_u64(0);
      out.put(e.what());
      out.flush();
      return 1;
    }
    out.flush();
    for (;;) {
      uint64_t n = 0;
      try {
        n = in.get_u64();
      } catch (const std::exception&) {
        return 0;  // the host closed the pipe: done
      }
      std::vector<RewardInput> inputs;
      for (uint64_t i = 0; i < n; ++i) {
        WireSample s = read_sample(in);
        RewardInput r;
        r.prompt_messages_json = std::move(s.messages_json);
        r.completion = std::move(s.completion);
        r.conversation_json = std::move(s.conversation_json);
        r.ids_known = s.has_ids;
        r.completion_ids = std::move(s.ids);
        r.completion_tokens = s.tokens;
        r.is_truncated = s.truncated;
        r.prompt_index = s.prompt_index;
        auto cols = std::make_shared<RowColumns>();
        for (size_t c = 0; c < s.column_names.size(); ++c)
          cols->columns.push_back({s.column_names[c], s.column_json[c], s.column_text[c]});
        cols->json = std::move(s.columns_json);
        r.columns = std::move(cols);
        inputs.push_back(std::move(r));
      }
      TrainerState state;
      state.global_step = in.get_i64();
      state.max_steps = in.get_i64();
      state.epoch = in.get_f64();
      const long failed_before = fn->failures();
      const std::vector<double> rewards = fn->score(inputs, state);
      out.put_u64(rewards.size());
      for (double r : rewards) out.put_f64(r);
      out.put_u64(fn->failures() != failed_before);
      out.put(fn->failures() != failed_before ? "score() failed (the worker's message is above)" : "");
      const auto drained = metrics->drain();
      out.put_u64(drained.size());
      for (const auto& [k, v] : drained) {
        out.put(k);
        out.put_f64(v);
      }
      out.flush();
    }
  } catch (const std::exception& e) {
    spdlog::error("grpo-plugin-worker: {}", e.what());
    return 1;
  }
}

}  // namespace grpo::plugins
