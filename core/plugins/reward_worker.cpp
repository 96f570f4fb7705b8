#include "plugins/reward_worker.h"

#include <sched.h>
#include <signal.h>

#include <cstring>
#include <random>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "plugins/plugin_error.h"
#include "plugins/plugin_registry.h"
#include "plugins/reward_function.h"
#include "tokenizer/tokenizer.h"

namespace grpo::plugins {

namespace {

constexpr size_t kFirstBatchBytes = 1 << 20;  // grows to the largest batch seen
// A reply is its rewards (8 bytes each) plus an error message and metrics: a
// claimed length past this is no reply, refused before it is allocated.
constexpr uint64_t kReplyExtraBytes = 64ull << 20;
// A worker whose reply pipe ended has this long to exit of its own (a crash
// being reported) before it is killed: one that closed the pipe and went on
// must not be waited for.
constexpr int64_t kExitGraceMs = 2000;

}  // namespace

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

RewardWorker::~RewardWorker() = default;

void RewardWorker::start() {
  const std::string exe = plugin_worker_path(isolation_.worker_exe);
  if (const int rc = process_.start(exe, batch_.fd()); rc != 0)
    throw PluginError(fmt::format("cannot start the plugin worker {} for '{}': {} (it is installed beside "
                                  "grpo-host; set GRPO_PLUGIN_WORKER to its path)",
                                  exe, info_.name, std::strerror(rc)));
  token_ = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  sequence_ = 0;
  Wire out(process_.to_child()), in(process_.from_child());
  out.put_u64(kRewardWorkerMagic);
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
    error = process_.reap(kExitGraceMs);
  }
  process_.stop();
  throw PluginError(fmt::format("reward plugin '{}' ({}) could not be created in its worker process: {}", info_.name,
                                info_.file, error));
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
    if (!process_.running()) start();  // restarted after a crash or a timeout
    used = write_batch(batch_, rows, state);
  } catch (const std::exception& e) {
    reply.failed = true;
    reply.error = e.what();
    return reply;
  }
  SharedCore core(process_.pid());
  Wire out(process_.to_child()), in(process_.from_child());
  // The worker's death is watched for, not only its pipe's end: a helper the
  // plugin forked keeps the pipe open after the worker dies, and without
  // --reward_timeout the host would wait for that helper forever.
  in.interrupt_when([this] {
    if (process_.exited_and_drained()) throw std::runtime_error("end of stream");
    return isolation_.give_up && isolation_.give_up();
  });
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
    if (!ended) process_.kill_group();  // alive, and of no further use: never waited for
    const std::string why = process_.reap(ended ? kExitGraceMs : 0);
    process_.stop();
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

int serve_reward_plugin(Wire& in, Wire& out, int shm_fd) {
  std::unique_ptr<tok::Tokenizer> tokenizer;  // declared before fn: it outlives the plugin's instance
  std::unique_ptr<RewardFunction> fn;
  auto metrics = std::make_shared<MetricsSink>();
  try {
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
