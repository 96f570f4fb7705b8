#include "dist/world.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include "dist/nccl_group.h"
#include "dist/world_impl.h"
#include "util/clock.h"

namespace grpo::dist {

World::World() = default;
World::~World() = default;

namespace {

// NCCL takes one rank per GPU: ranks that share one (two "nodes" on one
// machine, or a CUDA_VISIBLE_DEVICES that names the same GPU twice) keep
// their device tensors on Gloo, which copies them through host memory.
// Every rank reads every rank's GPU from the store, so all decide alike.
bool every_rank_has_its_own_gpu(c10d::Store& store, const RankEnv& env, at::Device device, DeviceBackend backend) {
  const std::string mine = device_uuid(device);
  store.set(fmt::format("gpu_uuid/{}", env.rank), std::vector<uint8_t>(mine.begin(), mine.end()));
  std::vector<std::string> uuids;
  for (int r = 0; r < env.world_size; ++r) {
    const std::vector<uint8_t> bytes = store.get(fmt::format("gpu_uuid/{}", r));
    uuids.emplace_back(bytes.begin(), bytes.end());
  }
  const auto shared = ranks_sharing_a_gpu(uuids);
  if (!shared) return true;
  if (backend == DeviceBackend::Nccl)
    throw CollectiveError(fmt::format("--ddp_backend nccl: ranks {} and {} share one GPU ({}), and NCCL takes one "
                                         "rank per GPU; give each rank a GPU of its own, or drop --ddp_backend",
                                         shared->first, shared->second, uuids[static_cast<size_t>(shared->first)]));
  if (env.rank == 0)
    spdlog::warn("ranks {} and {} share one GPU ({}), and NCCL takes one rank per GPU: the ranks exchange gradients "
                 "over Gloo, through host memory (give each rank a GPU of its own for NCCL)",
                 shared->first, shared->second, uuids[static_cast<size_t>(shared->first)]);
  return false;
}

}  // namespace

std::unique_ptr<World> World::join(const RankEnv& env, std::chrono::milliseconds collective_timeout,
                                   std::optional<std::chrono::milliseconds> join_timeout, at::Device device,
                                   DeviceBackend backend) {
  // Joining is bounded by its own limit; every collective sets collective_timeout itself.
  const std::chrono::milliseconds timeout = join_timeout.value_or(collective_timeout);
  auto w = std::make_unique<World>();
  w->rank_ = env.rank;
  w->size_ = env.world_size;
  w->local_rank_ = env.local_rank;
  w->local_size_ = env.local_world_size;
  w->timeout_ = collective_timeout;
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
    // Whether the GPUs allow NCCL, decided alike on every rank before any group forms.
    const bool nccl = device.is_cuda() && backend != DeviceBackend::Gloo &&
                      every_rank_has_its_own_gpu(*impl->store, env, device, backend);
    auto make_group = [&](const std::string& prefix) {
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      options->devices.push_back(gloo_device(env.master_addr));
      options->threads = 1;
      auto store = c10::make_intrusive<c10d::PrefixStore>(prefix, impl->store);
      return c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, options);
    };
    impl->train = make_group("train/");
    impl->rollout = make_group("rollout/");
    // NCCL's own watchdog stays a backstop: the heartbeats below name a
    // stopped rank sooner, and the World aborts the group when it gives up.
    if (nccl) {
      impl->nccl = make_nccl_group(c10::make_intrusive<c10d::PrefixStore>("train_nccl/", impl->store), env.rank,
                                   env.world_size, device, collective_timeout + std::chrono::minutes(1));
      if (env.rank == 0)
        spdlog::info("gradients and optimizer shards go over NCCL between the GPUs of {} rank(s)", env.world_size);
    }
  } catch (const CollectiveError&) {
    throw;  // --ddp_backend nccl on ranks that share a GPU: said as it is
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

bool World::uses_nccl() const { return impl_ && impl_->nccl; }

void World::fail(const std::string& collective, const std::string& what, double started_s, const std::string& who,
                 const std::string& cause_text) {
  // A collective that will not finish leaves NCCL's kernels waiting on the
  // device: aborting the communicator releases them, so the process can
  // save and exit instead of hanging in the communicator's destructor.
  if (impl_) impl_->abort_nccl();
  throw CollectiveError(fmt::format("rank {}: the {} of {} failed after {:.1f} s (--ddp_timeout {:.0f} s): {}; {}",
                                    rank_, collective, what, util::now_s() - started_s,
                                    static_cast<double>(timeout_.count()) / 1000.0, who, cause_text));
}

// Gloo would wait the whole --ddp_timeout for a rank that is stopped or
// gone; its heartbeat says so within a few seconds, so the wait is cut into
// slices and the others' heartbeats read between them.
// An NCCL collective is polled instead: its wait() with a limit would give
// up on the communicator itself.
void World::wait(c10d::Work& work, const std::string& collective, const std::string& what, double started_s,
                 bool on_device) {
  const double timeout_s = static_cast<double>(timeout_.count()) / 1000.0;
  const double silence_limit = std::clamp(timeout_s / 2, 1.0, 10.0);
  while (true) {
    try {
      if (!on_device) {
        work.wait(std::chrono::milliseconds(1000));
        return;
      }
      const double slice_end = util::now_s() + 1.0;
      while (!work.isCompleted() && util::now_s() < slice_end) std::this_thread::sleep_for(std::chrono::microseconds(200));
      if (work.isCompleted()) {
        work.wait();  // its error, if it failed; else orders this thread's stream after it
        return;
      }
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
void World::each(std::vector<at::Tensor>& tensors, Channel channel, const char* collective, const std::string& what,
                 const std::function<c10::intrusive_ptr<c10d::Work>(c10d::Backend&, std::vector<at::Tensor>&)>& start) {
  if (!distributed() || tensors.empty()) return;
  const double t0 = util::now_s();
  std::vector<std::pair<c10::intrusive_ptr<c10d::Work>, bool>> works;
  try {
    for (at::Tensor& t : tensors) {
      std::vector<at::Tensor> one{t};
      c10d::Backend& group = impl_->group(channel, one);
      works.emplace_back(start(group, one), &group == impl_->nccl.get());
    }
  } catch (const std::exception& e) {
    fail(collective, what, t0, impl_->who_stopped(), cause(e));
  }
  for (auto& [w, on_device] : works) wait(*w, collective, what, t0, on_device);
}

void World::all_reduce_sum(std::vector<at::Tensor>& tensors, Channel channel, const std::string& what) {
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::SUM;
  opts.timeout = timeout_;
  each(tensors, channel, "all_reduce", what,
       [&](c10d::Backend& group, std::vector<at::Tensor>& t) { return group.allreduce(t, opts); });
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
      c10d::Backend& group = impl_->group(channel, one);
      started_.push_back({group.allreduce(one, opts), what, t0, &group == impl_->nccl.get()});
    }
  } catch (const std::exception& e) {
    started_.clear();
    fail("all_reduce", what, t0, impl_->who_stopped(), cause(e));
  }
}

void World::finish_started() {
  std::vector<Started> started = std::move(started_);
  started_.clear();
  for (Started& s : started) wait(*s.work, "all_reduce", s.what, s.started_s, s.on_device);
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
  each(tensors, channel, "reduce", what,
       [&](c10d::Backend& group, std::vector<at::Tensor>& t) { return group.reduce(t, opts); });
}

void World::broadcast(std::vector<at::Tensor>& tensors, int root, Channel channel, const std::string& what) {
  c10d::BroadcastOptions opts;
  opts.rootRank = root;
  opts.timeout = timeout_;
  each(tensors, channel, "broadcast", what,
       [&](c10d::Backend& group, std::vector<at::Tensor>& t) { return group.broadcast(t, opts); });
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
