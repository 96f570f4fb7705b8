#include "dist/world.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include "util/clock.h"

namespace grpo::dist {

namespace {

constexpr auto kBeat = std::chrono::milliseconds(500);

// c10d's message without the C++ backtrace that follows its first line.
std::string cause(const std::exception& e) {
  std::string text = e.what();
  return text.substr(0, std::min(text.find('\n'), size_t{300}));
}

bool is_loopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0; }

c10::intrusive_ptr<c10d::TCPStore> connect_store(const RankEnv& env, bool server, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(env.master_port);
  opts.isServer = server;
  opts.numWorkers = static_cast<size_t>(env.world_size);
  opts.waitWorkers = false;  // the Gloo rendezvous waits for everyone, with the same timeout
  opts.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(env.master_addr, opts);
}

std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master) {
  // GLOO_SOCKET_IFNAME, as PyTorch reads it, picks the interface on clusters
  // with several; a loopback run stays on loopback.
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  if (is_loopback(master)) return c10d::ProcessGroupGloo::createDeviceForHostname(master);
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

}  // namespace

struct World::Impl {
  RankEnv env;
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> train, rollout;

  // The heartbeat: its own store connection, bumping hb/<rank> every kBeat.
  c10::intrusive_ptr<c10d::TCPStore> beat_store;
  std::thread beat;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;

  c10d::ProcessGroupGloo& group(Channel c) { return c == Channel::Train ? *train : *rollout; }

  void start_heartbeat() {
    beat_store = connect_store(env, false, std::chrono::milliseconds(10000));
    beat = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu);
      while (!stop) {
        try {
          beat_store->add("hb/" + std::to_string(env.rank), 1);
        } catch (const std::exception&) {
          return;  // the store is gone (rank 0 ended): the next collective will say so
        }
        cv.wait_for(lock, kBeat, [this] { return stop; });
      }
    });
  }

  // Watching the others while a collective waits: each rank's last
  // heartbeat count and when it last changed.
  c10::intrusive_ptr<c10d::TCPStore> watch_store;
  std::mutex watch_mu;
  std::vector<int64_t> last_beat;
  std::vector<double> last_change;

  // Reads every heartbeat; returns the ranks silent for `limit_s` or more.
  // Throws when the store itself is gone (rank 0 ended).
  std::vector<int> silent_for(double limit_s) {
    std::lock_guard<std::mutex> lock(watch_mu);
    const double now = util::now_s();
    if (last_beat.empty()) {
      last_beat.assign(static_cast<size_t>(env.world_size), -1);
      last_change.assign(static_cast<size_t>(env.world_size), now);
    }
    std::vector<int> silent;
    for (int r = 0; r < env.world_size; ++r) {
      if (r == env.rank) continue;
      const int64_t beat = watch_store->add("hb/" + std::to_string(r), 0);
      const auto i = static_cast<size_t>(r);
      if (beat != last_beat[i]) last_beat[i] = beat, last_change[i] = now;
      else if (now - last_change[i] >= limit_s) silent.push_back(r);
    }
    return silent;
  }

  // Who stopped answering, as a sentence; waits a few beats when nothing
  // was watched yet (a collective that failed at once).
  std::string who_stopped() {
    try {
      silent_for(1e9);
      std::this_thread::sleep_for(kBeat * 4);
      std::vector<int> silent = silent_for(kBeat.count() * 3 / 1000.0);
      if (silent.empty())
        return "every rank's heartbeat is still running: a rank is slow or failed before the collective (see its log)";
      return fmt::format("rank {} stopped answering (no heartbeat: stalled or dead)", fmt::join(silent, ", "));
    } catch (const std::exception&) {
      return fmt::format("rank 0, which hosts the rendezvous store at {}:{}, is gone", env.master_addr, env.master_port);
    }
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    if (beat.joinable()) beat.join();
  }
};

struct World::Started {
  c10::intrusive_ptr<c10d::Work> work;
  std::string what;
  double started_s;
};

World::World() = default;
World::~World() = default;

std::unique_ptr<World> World::join(const RankEnv& env, std::chrono::milliseconds collective_timeout,
                                   std::optional<std::chrono::milliseconds> join_timeout) {
  // Joining is bounded by its own limit; every collective sets collective_timeout itself.
  const std::chrono::milliseconds timeout = join_timeout.value_or(collective_timeout);
  auto w = std::make_unique<World>();
  w->rank_ = env.rank;
  w->size_ = env.world_size;
  w->local_rank_ = env.local_rank;
  w->local_size_ = env.local_world_size;
  w->timeout_ = collective_timeout;
  if (env.world_size < 2) return w;
  auto impl = std::make_unique<Impl>();
  impl->env = env;
  const double timeout_s = static_cast<double>(timeout.count()) / 1000.0;
  try {
    impl->store = connect_store(env, env.rank == 0, timeout);
  } catch (const std::exception& e) {
    throw CollectiveError(fmt::format(
        "rank {}: {} the rendezvous store at {}:{} failed within {:.0f} s: {} ({})", env.rank,
        env.rank == 0 ? "hosting" : "connecting to", env.master_addr, env.master_port, timeout_s,
        env.rank == 0 ? "is MASTER_PORT free?" : "is rank 0 running, and MASTER_ADDR/MASTER_PORT the same everywhere?",
        cause(e)));
  }
  try {
    auto make_group = [&](const std::string& prefix) {
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      options->devices.push_back(gloo_device(env.master_addr));
      options->threads = 1;
      auto store = c10::make_intrusive<c10d::PrefixStore>(prefix, impl->store);
      return c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, options);
    };
    impl->train = make_group("train/");
    impl->rollout = make_group("rollout/");
  } catch (const std::exception& e) {
    throw CollectiveError(fmt::format(
        "rank {}: joining the process group of {} ranks at {}:{} failed within {:.0f} s (--ddp_timeout): not every "
        "rank joined; check that each was started with the same WORLD_SIZE, MASTER_ADDR and MASTER_PORT ({})",
        env.rank, env.world_size, env.master_addr, env.master_port, timeout_s, cause(e)));
  }
  impl->start_heartbeat();
  impl->watch_store = connect_store(env, false, std::chrono::milliseconds(10000));
  w->impl_ = std::move(impl);
  return w;
}

void World::fail(const std::string& collective, const std::string& what, double started_s, const std::string& who,
                 const std::string& cause_text) {
  throw CollectiveError(fmt::format("rank {}: the {} of {} failed after {:.1f} s (--ddp_timeout {:.0f} s): {}; {}",
                                    rank_, collective, what, util::now_s() - started_s,
                                    static_cast<double>(timeout_.count()) / 1000.0, who, cause_text));
}

// Gloo would wait the whole --ddp_timeout for a rank that is stopped or
// gone; its heartbeat says so within a few seconds, so the wait is cut into
// slices and the others' heartbeats read between them.
void World::wait(c10d::Work& work, const std::string& collective, const std::string& what, double started_s) {
  const double timeout_s = static_cast<double>(timeout_.count()) / 1000.0;
  const double silence_limit = std::clamp(timeout_s / 2, 1.0, 10.0);
  while (true) {
    try {
      work.wait(std::chrono::milliseconds(1000));
      return;
    } catch (const std::exception& e) {
      if (work.isCompleted()) fail(collective, what, started_s, impl_->who_stopped(), cause(e));  // it failed
    }
    std::vector<int> silent;
    try {
      silent = impl_->silent_for(silence_limit);
    } catch (const std::exception&) {
      fail(collective, what, started_s, impl_->who_stopped(), "the rendezvous store stopped answering");
    }
    if (!silent.empty())
      fail(collective, what, started_s,
           fmt::format("rank {} stopped answering (no heartbeat for {:.1f} s: stalled or dead)", fmt::join(silent, ", "),
                       silence_limit),
           "not waiting for the rest of the timeout");
    if (util::now_s() - started_s > timeout_s + 1.0)
      fail(collective, what, started_s, impl_->who_stopped(), "timed out");
  }
}

// Launches `start` on each tensor (Gloo reduces each as one buffer), then
// waits for them all.
void World::each(std::vector<at::Tensor>& tensors, const char* collective, const std::string& what,
                 const std::function<c10::intrusive_ptr<c10d::Work>(std::vector<at::Tensor>&)>& start) {
  if (!distributed() || tensors.empty()) return;
  const double t0 = util::now_s();
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  try {
    for (at::Tensor& t : tensors) {
      std::vector<at::Tensor> one{t};
      works.push_back(start(one));
    }
  } catch (const std::exception& e) {
    fail(collective, what, t0, impl_->who_stopped(), cause(e));
  }
  for (auto& w : works) wait(*w, collective, what, t0);
}

void World::all_reduce_sum(std::vector<at::Tensor>& tensors, Channel channel, const std::string& what) {
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::SUM;
  opts.timeout = timeout_;
  each(tensors, "all_reduce", what, [&](std::vector<at::Tensor>& t) { return impl_->group(channel).allreduce(t, opts); });
}

void World::start_all_reduce_sum(std::vector<at::Tensor>& tensors, Channel channel, const std::string& what) {
  if (!distributed() || tensors.empty()) return;
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::SUM;
  opts.timeout = timeout_;
  const double t0 = util::now_s();
  try {
    for (at::Tensor& t : tensors) {
      std::vector<at::Tensor> one{t};
      started_.push_back({impl_->group(channel).allreduce(one, opts), what, t0});
    }
  } catch (const std::exception& e) {
    started_.clear();
    fail("all_reduce", what, t0, impl_->who_stopped(), cause(e));
  }
}

void World::finish_started() {
  std::vector<Started> started = std::move(started_);
  started_.clear();
  for (Started& s : started) wait(*s.work, "all_reduce", s.what, s.started_s);
}

void World::announce_stop() {
  if (!distributed()) return;
  try {
    impl_->watch_store->set("stopped", std::vector<uint8_t>{1});
  } catch (const std::exception&) {  // the store is gone: the others learn it the same way
  }
}

bool World::another_rank_stopped() {
  if (!distributed()) return false;
  try {
    return impl_->watch_store->check({"stopped"});
  } catch (const std::exception&) {
    return true;
  }
}

void World::reduce_sum(std::vector<at::Tensor>& tensors, int root, Channel channel, const std::string& what) {
  c10d::ReduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::SUM;
  opts.rootRank = root;
  opts.timeout = timeout_;
  each(tensors, "reduce", what, [&](std::vector<at::Tensor>& t) { return impl_->group(channel).reduce(t, opts); });
}

void World::broadcast(std::vector<at::Tensor>& tensors, int root, Channel channel, const std::string& what) {
  c10d::BroadcastOptions opts;
  opts.rootRank = root;
  opts.timeout = timeout_;
  each(tensors, "broadcast", what, [&](std::vector<at::Tensor>& t) { return impl_->group(channel).broadcast(t, opts); });
}

// Every rank's byte count; then `bytes` padded to the largest, as a tensor.
std::pair<std::vector<int64_t>, at::Tensor> World::padded(const std::string& bytes, Channel channel,
                                                          const char* collective, const std::string& what, double t0) {
  c10d::AllgatherOptions opts;
  opts.timeout = timeout_;
  std::vector<at::Tensor> size_in{at::full({1}, static_cast<int64_t>(bytes.size()), at::kLong)};
  std::vector<std::vector<at::Tensor>> size_out(1);
  for (int r = 0; r < size_; ++r) size_out[0].push_back(at::empty({1}, at::kLong));
  wait(*impl_->group(channel).allgather(size_out, size_in, opts), collective, what, t0);
  std::vector<int64_t> sizes;
  int64_t largest = 1;
  for (const at::Tensor& s : size_out[0]) {
    sizes.push_back(s.item<int64_t>());
    largest = std::max(largest, sizes.back());
  }
  at::Tensor in = at::zeros({largest}, at::kByte);
  std::memcpy(in.data_ptr(), bytes.data(), bytes.size());
  return {sizes, in};
}

namespace {

std::vector<std::string> unpad(const std::vector<at::Tensor>& received, const std::vector<int64_t>& sizes) {
  std::vector<std::string> out;
  for (size_t r = 0; r < received.size(); ++r)
    out.emplace_back(static_cast<const char*>(received[r].data_ptr()), static_cast<size_t>(sizes[r]));
  return out;
}

}  // namespace

std::vector<std::string> World::all_gather(const std::string& bytes, Channel channel, const std::string& what) {
  if (!distributed()) return {bytes};
  const double t0 = util::now_s();
  try {
    auto [sizes, padded_in] = padded(bytes, channel, "all_gather", what, t0);
    std::vector<at::Tensor> in{padded_in};
    std::vector<std::vector<at::Tensor>> out(1);
    for (int r = 0; r < size_; ++r) out[0].push_back(at::empty_like(padded_in));
    c10d::AllgatherOptions opts;
    opts.timeout = timeout_;
    wait(*impl_->group(channel).allgather(out, in, opts), "all_gather", what, t0);
    return unpad(out[0], sizes);
  } catch (const CollectiveError&) {
    throw;
  } catch (const std::exception& e) {
    fail("all_gather", what, t0, impl_->who_stopped(), cause(e));
  }
}

std::vector<std::string> World::gather_to_main(const std::string& bytes, Channel channel, const std::string& what) {
  if (!distributed()) return {bytes};
  const double t0 = util::now_s();
  try {
    auto [sizes, padded_in] = padded(bytes, channel, "gather", what, t0);
    std::vector<at::Tensor> in{padded_in};
    std::vector<std::vector<at::Tensor>> out;  // rank 0 alone receives
    if (is_main()) {
      out.emplace_back();
      for (int r = 0; r < size_; ++r) out[0].push_back(at::empty_like(padded_in));
    }
    c10d::GatherOptions opts;
    opts.rootRank = 0;
    opts.timeout = timeout_;
    wait(*impl_->group(channel).gather(out, in, opts), "gather", what, t0);
    return is_main() ? unpad(out[0], sizes) : std::vector<std::string>{};
  } catch (const CollectiveError&) {
    throw;
  } catch (const std::exception& e) {
    fail("gather", what, t0, impl_->who_stopped(), cause(e));
  }
}

void World::barrier(Channel channel, const std::string& what) {
  if (!distributed()) return;
  const double t0 = util::now_s();
  c10::intrusive_ptr<c10d::Work> work;
  try {
    c10d::BarrierOptions opts;
    opts.timeout = timeout_;
    work = impl_->group(channel).barrier(opts);
  } catch (const std::exception& e) {
    fail("barrier", what, t0, impl_->who_stopped(), cause(e));
  }
  wait(*work, "barrier", what, t0);
}

}  // namespace grpo::dist
