// Internal to the World (world.cpp, world_bytes.cpp): its groups, the
// heartbeat every rank runs, and the collectives it has started.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "dist/nccl_group.h"
#include "dist/world.h"
#include "util/clock.h"

namespace grpo::dist {

namespace detail {

inline constexpr auto kBeat = std::chrono::milliseconds(500);

// c10d's message without the C++ backtrace that follows its first line.
inline std::string cause(const std::exception& e) {
  std::string text = e.what();
  return text.substr(0, std::min(text.find('\n'), size_t{300}));
}

inline bool is_loopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0; }

inline c10::intrusive_ptr<c10d::TCPStore> connect_store(const RankEnv& env, bool server, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(env.master_port);
  opts.isServer = server;
  opts.numWorkers = static_cast<size_t>(env.world_size);
  opts.waitWorkers = false;  // the Gloo rendezvous waits for everyone, with the same timeout
  opts.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(env.master_addr, opts);
}

inline std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master) {
  // GLOO_SOCKET_IFNAME, as PyTorch reads it, picks the interface on clusters
  // with several; a loopback run stays on loopback.
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  if (is_loopback(master)) return c10d::ProcessGroupGloo::createDeviceForHostname(master);
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

}  // namespace detail

using namespace detail;

struct World::Impl {
  RankEnv env;
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> train, rollout;
  c10::intrusive_ptr<c10d::Backend> nccl;  // ranks on GPUs: the training channel's device tensors
  // Set by whichever thread fails first (the rollout thread's Gloo collectives included).
  std::atomic<bool> nccl_aborted{false};

  // The heartbeat: its own store connection, bumping hb/<rank> every kBeat.
  c10::intrusive_ptr<c10d::TCPStore> beat_store;
  std::thread beat;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;

  c10d::ProcessGroupGloo& group(Channel c) { return c == Channel::Train ? *train : *rollout; }
  // The group that carries `tensors` on `c`: NCCL for the training
  // channel's GPU tensors where the world has it, else Gloo.
  c10d::Backend& group(Channel c, const std::vector<at::Tensor>& tensors) {
    if (c == Channel::Train && nccl_serves(nccl, tensors)) {
      // An aborted communicator would be formed again, lazily, by a blocking init that no other rank joins.
      if (nccl_aborted)
        throw CollectiveError(fmt::format("rank {}: the NCCL group was aborted after an earlier collective failed "
                                          "(the first error above says which)",
                                          env.rank));
      return *nccl;
    }
    return group(c);
  }

  // Frees this rank from NCCL without the others (a clean shutdown waits for them).
  void abort_nccl() {
    if (nccl && !nccl_aborted.exchange(true)) abort_quietly(*nccl);
  }

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
    // NCCL's communicators are destroyed in order (an aborted one is gone already). Leaving on an
    // error, the other ranks may never come to a clean shutdown, which waits for them: abort.
    if (std::uncaught_exceptions() > 0) abort_nccl();
    if (nccl && !nccl_aborted) {
      try {
        nccl->shutdown();
      } catch (const std::exception&) {
      }
    }
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
  bool on_device;  // NCCL's
};

}  // namespace grpo::dist
