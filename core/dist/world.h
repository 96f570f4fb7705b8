// The processes of a data-parallel run and the collectives between them:
// c10d's TCPStore hosted by rank 0 at MASTER_ADDR:MASTER_PORT, and Gloo
// process groups over it. A world of one process has no group and every
// collective is the identity, so the trainer's code is the same for both;
// one that a launcher started (torchrun --nproc_per_node 1) joins a group of
// one, as DDP does, and its collectives run.
//
// Two channels, two groups: the rollout (sampling on async_generate's
// background thread) and training (the main thread) each keep their own
// order of collectives, which one group would interleave differently on
// different ranks.
//
// A collective that fails or outlasts --ddp_timeout throws CollectiveError
// naming the collective, what it carried, and the ranks that stopped
// answering: every rank runs a heartbeat on the store, and a collective
// that waits reads the others' heartbeats, so a stopped or dead rank is
// named within seconds (half the timeout, at most 10 s) rather than after
// the whole timeout. A silent hang is the most reported failure of
// distributed GRPO runs.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dist/device_backend.h"
#include "dist/rank_env.h"

namespace c10d {
class Backend;
class Work;
}  // namespace c10d

namespace grpo::dist {

class CollectiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Channel { Train, Rollout };

class World {
 public:
  // One process: no group.
  World();
  // Joins the run described by `env` (a world of one too: its group has
  // one rank, and every collective runs as in a larger one): rank 0 hosts the
  // store; everyone waits up to `join_timeout` (default: `timeout`, each
  // collective's limit) for the others to join.
  // Ranks on GPUs (`device` CUDA) also build an NCCL group, which carries
  // the training channel's collectives of device tensors, unless `backend`
  // says Gloo, or (Auto) two ranks share a GPU; under Nccl, ranks that share
  // one are a CollectiveError.
  static std::unique_ptr<World> join(const RankEnv& env, std::chrono::milliseconds timeout,
                                     std::optional<std::chrono::milliseconds> join_timeout = std::nullopt,
                                     at::Device device = at::kCPU, DeviceBackend backend = DeviceBackend::Auto);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  bool is_main() const { return rank_ == 0; }
  // In a process group (of one rank or more): collectives run.
  bool distributed() const { return impl_ != nullptr; }

  // True when the training channel's device tensors go over NCCL.
  bool uses_nccl() const;

  // Sums float tensors (contiguous; CPU over Gloo, GPU over NCCL where the
  // world has it) in place over the ranks.
  void all_reduce_sum(std::vector<at::Tensor>& tensors, Channel channel, const std::string& what);
  // all_reduce_sum started now and left running, for work to overlap it (the
  // backward pass); finish_started() waits for every collective started so,
  // as the blocking ones wait. Collectives are matched by their order: every
  // rank starts the same ones in the same order.
  void start_all_reduce_sum(std::vector<at::Tensor>& tensors, Channel channel, const std::string& what);
  void finish_started();
  // Sums float tensors over the ranks into rank `root`'s (the others' are
  // left undefined in value).
  void reduce_sum(std::vector<at::Tensor>& tensors, int root, Channel channel, const std::string& what);
  // Rank `root`'s tensors (CPU, contiguous) into everyone's, in place.
  void broadcast(std::vector<at::Tensor>& tensors, int root, Channel channel, const std::string& what);
  // Every rank's bytes, in rank order (sizes may differ).
  std::vector<std::string> all_gather(const std::string& bytes, Channel channel, const std::string& what);
  // The same, on rank 0 only (the others get an empty list).
  std::vector<std::string> gather_to_main(const std::string& bytes, Channel channel, const std::string& what);
  void barrier(Channel channel, const std::string& what);

  // A rank that leaves on a stop signal without meeting the others says so
  // first, so that a rank whose collective then fails can tell that from a
  // rank that died. another_rank_stopped() is also true when rank 0's store
  // is gone: rank 0 leaves last of all only when it dies or stops.
  void announce_stop();
  bool another_rank_stopped();

 private:
  struct Impl;
  void wait(c10d::Work& work, const std::string& collective, const std::string& what, double started_s,
            bool on_device = false);
  void each(std::vector<at::Tensor>& tensors, Channel channel, const char* collective, const std::string& what,
            const std::function<c10::intrusive_ptr<c10d::Work>(c10d::Backend&, std::vector<at::Tensor>&)>& start);
  std::pair<std::vector<int64_t>, at::Tensor> padded(const std::string& bytes, Channel channel, const char* collective,
                                                     const std::string& what, double t0);
  [[noreturn]] void fail(const std::string& collective, const std::string& what, double started_s,
                         const std::string& who, const std::string& cause_text);
  struct Started;
  std::unique_ptr<Impl> impl_;
  std::vector<Started> started_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::chrono::milliseconds timeout_{0};
};

}  // namespace grpo::dist
