#include "plugins/reward_worker.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "plugins/plugin_error.h"
#include "plugins/plugin_registry.h"
#include "plugins/reward_function.h"
#include "tokenizer/tokenizer.h"

extern char** environ;

namespace grpo::plugins {

namespace {

// The child reads requests on fd 3, answers on fd 4 and finds each batch in
// the shared memory at fd 5; its stdout and stderr stay the host's, so what a
// plugin prints cannot corrupt the stream.
constexpr int kChildIn = 3, kChildOut = 4, kChildBatch = 5;
constexpr size_t kFirstBatchBytes = 1 << 20;  // grows to the largest batch seen
constexpr uint64_t kMagic = 0x67727031726577ull;  // "grp1rew": replies carry token and batch number
// A reply is its rewards (8 bytes each) plus an error message and metrics: a
// claimed length past this is no reply, refused before it is allocated.
constexpr uint64_t kReplyExtraBytes = 64ull << 20;
// A worker whose reply pipe ended has this long to exit of its own (a crash
// being reported) before it is killed: one that closed the pipe and went on
// must not be waited for.
constexpr int64_t kExitGraceMs = 2000;

// The bounded fields of a reply's body.
class ReplyReader {
 public:
  explicit ReplyReader(const std::string& body) : body_(body) {}
  uint64_t u64() {
    uint64_t v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  double f64() {
    double v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  std::string str() {
    const uint64_t n = u64();
    return {take(n), n};
  }
  bool done() const { return pos_ == body_.size(); }

 private:
  const char* take(uint64_t n) {
    if (n > body_.size() - pos_) throw std::runtime_error("its reply is cut short");
    const char* p = body_.data() + pos_;
    pos_ += n;
    return p;
  }
  const std::string& body_;
  size_t pos_ = 0;
};

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

std::string Wire::take() {
  std::string s = std::move(out_);
  out_.clear();
  return s;
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
    if (deadline_ms >= 0 || interrupt_) {
      if (interrupt_ && interrupt_()) throw std::runtime_error("interrupted");
      pollfd pfd{fd_, POLLIN, 0};
      int64_t left = deadline_ms < 0 ? INT_MAX : deadline_ms - now_ms();
      if (interrupt_) left = std::min<int64_t>(left, 50);
      const int ready = left <= 0 ? 0 : ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, INT_MAX)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0 && deadline_ms >= 0 && now_ms() >= deadline_ms) throw std::runtime_error("timeout");
      if (ready == 0) continue;
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

std::string Wire::get_string(int64_t deadline_ms, uint64_t max_bytes) {
  const uint64_t n = get_u64(deadline_ms);
  if (n > max_bytes)
    throw std::runtime_error(fmt::format("it claims {} bytes, more than the {} its reply can hold", n, max_bytes));
  std::string s(n, '\0');
  read_exact(s.data(), s.size(), deadline_ms);
  return s;
}


RewardWorker::RewardWorker(const PluginInfo& info, const nlohmann::json& options, std::string run_config_json,
                           Isolation isolation, std::string tokenizer_dir, tok::ChatFamily family)
    : info_(info), options_json_(options.dump()), run_config_json_(std::move(run_config_json)),
      tokenizer_dir_(std::move(tokenizer_dir)), family_(family), isolation_(std::move(isolation)) {
  try {
    batch_ = SharedMemory::create(kFirstBatchBytes);
  } catch (const std::exception& e) {
    throw PluginError(fmt::format("reward plugin '{}': {}", info_.name, e.what()));
  }
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
  const int child_in = ::fcntl(down[0], F_DUPFD_CLOEXEC, 10), child_out = ::fcntl(up[1], F_DUPFD_CLOEXEC, 10);
  const int child_batch = ::fcntl(batch_.fd(), F_DUPFD_CLOEXEC, 10);
  ::close(down[0]);
  ::close(up[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, child_in, kChildIn);
  posix_spawn_file_actions_adddup2(&actions, child_out, kChildOut);
  posix_spawn_file_actions_adddup2(&actions, child_batch, kChildBatch);
  // A process group of its own: Ctrl-C at a terminal reaches the host alone
  // (which stops the worker itself), and killing the group also ends the
  // helpers a plugin started.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  const std::string exe = worker_path(isolation_);
  char* argv[] = {const_cast<char*>(exe.c_str()), nullptr};
  const int rc = ::posix_spawn(&pid_, exe.c_str(), &actions, &attr, argv, environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  ::close(child_in);
  ::close(child_out);
  ::close(child_batch);
  to_child_ = down[1];
  from_child_ = up[0];
  if (rc != 0) {
    stop();
    throw PluginError(fmt::format("cannot start the plugin worker {} for '{}': {} (it is installed beside "
                                  "grpo-host; set GRPO_PLUGIN_WORKER to its path)",
                                  exe, info_.name, std::strerror(rc)));
  }
  token_ = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  sequence_ = 0;
  Wire out(to_child_), in(from_child_);
  out.put_u64(kMagic);
  out.put(info_.file);
  out.put(info_.name);
  out.put(options_json_);
  out.put(run_config_json_);
  out.put(tokenizer_dir_);
  out.put_u64(static_cast<uint64_t>(family_));
  out.put_u64(token_);
  std::string error;
  try {
    out.flush();
    if (in.get_u64() != 0) return;  // created
    error = in.get_string(-1, kReplyExtraBytes);
  } catch (const std::exception&) {
    error = reap(kExitGraceMs);
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
    kill_group();
    ::waitpid(pid_, nullptr, 0);
  }
  pid_ = -1;
}

// Only while the worker is not yet reaped: its pid, and the group's id with
// it, cannot have been given to another process before then.
void RewardWorker::kill_group() {
  ::kill(-pid_, SIGKILL);  // with the helpers its plugin started
  ::kill(pid_, SIGKILL);   // should the plugin have left the group
}

std::string RewardWorker::reap(int64_t grace_ms) {
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

// While a batch is scored, the worker's main thread and the host's thread
// that waits for it share the core the host wrote the batch from: that core's
// cache holds the batch, and neither side wakes an idle core. Woken on the
// other core, the worker paid for that core's wake-up and for the copy
// between caches, and the host then paid for its own wake-up there: together
// more than the rest of the call (bench_rewards). The host thread's own cores
// come back after the call; threads the plugin started earlier keep theirs.
class RewardWorker::SharedCore {
 public:
  explicit SharedCore(pid_t worker) {
    const int cpu = ::sched_getcpu();
    if (cpu < 0 || cpu >= CPU_SETSIZE || ::sched_getaffinity(0, sizeof mine_, &mine_) != 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ::sched_setaffinity(worker, sizeof one, &one);  // best effort: only a speed-up
    restore_ = ::sched_setaffinity(0, sizeof one, &one) == 0;
  }
  ~SharedCore() {
    if (restore_) ::sched_setaffinity(0, sizeof mine_, &mine_);
  }
  SharedCore(const SharedCore&) = delete;
  SharedCore& operator=(const SharedCore&) = delete;

 private:
  cpu_set_t mine_;
  bool restore_ = false;
};

WireReply RewardWorker::score(const std::vector<RewardView>& rows, const TrainerState& state) {
  WireReply reply;
  size_t used = 0;
  try {
    if (pid_ < 0) start();  // restarted after a crash or a timeout
    used = write_batch(batch_, rows, state);
  } catch (const std::exception& e) {
    reply.failed = true;
    reply.error = e.what();
    return reply;
  }
  SharedCore core(pid_);
  Wire out(to_child_), in(from_child_);
  if (isolation_.give_up) in.interrupt_when(isolation_.give_up);
  const uint64_t sequence = ++sequence_;
  out.put_u64(sequence);
  out.put_u64(used);
  const int64_t deadline = isolation_.timeout_s > 0 ? now_ms() + static_cast<int64_t>(isolation_.timeout_s * 1000) : -1;
  try {
    out.flush();
    if (in.get_u64(deadline) != token_ || in.get_u64(deadline) != sequence)
      throw std::runtime_error("not its reply to this batch (did the plugin write on the worker's pipe?)");
    const std::string body = in.get_string(deadline, rows.size() * sizeof(double) + kReplyExtraBytes);
    if (in.buffered()) throw std::runtime_error("more than one reply to one batch");
    ReplyReader r(body);
    const uint64_t n = r.u64();
    if (n > rows.size()) throw std::runtime_error(fmt::format("{} rewards for {} completions", n, rows.size()));
    for (uint64_t i = 0; i < n; ++i) reply.rewards.push_back(r.f64());
    reply.failed = r.u64() != 0;
    reply.error = r.str();
    const uint64_t metrics = r.u64();
    for (uint64_t i = 0; i < metrics; ++i) {
      std::string name = r.str();
      reply.metrics.emplace_back(std::move(name), r.f64());
    }
    if (!r.done()) throw std::runtime_error("its reply runs on past its end");
  } catch (const std::exception& e) {
    const std::string what = e.what();
    const bool timeout = what == "timeout", interrupted = what == "interrupted", ended = what == "end of stream";
    if (!ended) kill_group();  // alive, and of no further use: never waited for
    const std::string why = reap(ended ? kExitGraceMs : 0);
    stop();
    if (interrupted)
      throw ScoreInterrupted(fmt::format("reward plugin '{}' ({}) in its worker process", info_.name, info_.file));
    reply = {};
    reply.failed = true;
    if (timeout)
      reply.error = fmt::format("score() did not answer within {} s (--reward_timeout); its worker process was killed "
                                "and starts again for the next batch",
                                isolation_.timeout_s);
    else if (ended)
      reply.error = why + " inside score(); it starts again for the next batch";
    else
      reply.error = "its worker process sent a reply that is no answer to this batch: " + what +
                    "; it was killed and starts again for the next batch";
  }
  return reply;
}

int run_reward_worker(int in_fd, int out_fd, int shm_fd) {
  // The host reads this process's stdout and stderr as its own log.
  spdlog::set_default_logger(spdlog::stderr_logger_mt("grpo-plugin-worker"));
  Wire in(in_fd), out(out_fd);
  std::unique_ptr<tok::Tokenizer> tokenizer;  // declared before fn: it outlives the plugin's instance
  std::unique_ptr<RewardFunction> fn;
  auto metrics = std::make_shared<MetricsSink>();
  try {
    if (in.get_u64() != kMagic) return 2;
    const std::string library = in.get_string(), name = in.get_string();
    const nlohmann::json options = nlohmann::json::parse(in.get_string());
    const std::string run_config = in.get_string();
    const std::string tokenizer_dir = in.get_string();
    const auto family = static_cast<tok::ChatFamily>(in.get_u64());
    const uint64_t token = in.get_u64();
    try {
      // The run's tokenizer, for the text services the plugin may call.
      if (!tokenizer_dir.empty()) tokenizer = std::make_unique<tok::Tokenizer>(tok::Tokenizer::from_dir(tokenizer_dir));
      TextServices text;
      if (tokenizer) text = {tokenizer.get(), family, tokenizer_dir};
      PluginSources sources;
      sources.files = {library};
      sources.use_env = false;
      sources.use_builtin = false;
      const PluginRegistry registry = PluginRegistry::discover(sources);
      fn = RewardFunction::create(registry.require(name, GRPO_REWARD_INTERFACE), options, metrics, run_config, 1,
                                  text);
      out.put_u64(1);
    } catch (const std::exception& e) {
      out.put_u64(0);
      out.put(e.what());
      out.flush();
      return 1;
    }
    out.flush();
    SharedMemory batch = SharedMemory::attach(shm_fd);
    BatchViews views;
    for (;;) {
      uint64_t sequence = 0, used = 0;
      try {
        sequence = in.get_u64();
        used = in.get_u64();
      } catch (const std::exception&) {
        return 0;  // the host closed the pipe: done
      }
      batch.map_at_least(used);
      read_batch(batch.data(), used, &views);
      const long failed_before = fn->failures();
      const std::vector<double> rewards = fn->score_views(views.rows, views.state);
      Wire body(-1);  // assembled whole: the host reads its length before its fields
      body.put_u64(rewards.size());
      for (double r : rewards) body.put_f64(r);
      body.put_u64(fn->failures() != failed_before);
      body.put(fn->failures() != failed_before ? "score() failed (the worker's message is above)" : "");
      const auto drained = metrics->drain();
      body.put_u64(drained.size());
      for (const auto& [k, v] : drained) {
        body.put(k);
        body.put_f64(v);
      }
      out.put_u64(token);
      out.put_u64(sequence);
      out.put(body.take());
      out.flush();
    }
  } catch (const std::exception& e) {
    spdlog::error("grpo-plugin-worker: {}", e.what());
    return 1;
  }
}

}  // namespace grpo::plugins
