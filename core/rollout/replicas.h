// The server's engines (--data_parallel_size, as `trl vllm-serve` has it):
// one engine with its own batching queue per device, each loaded from the
// same model. A call's prompts are split into contiguous runs, one per
// replica, that generate at the same time; the answer is theirs joined in
// request order. A weight update reaches every replica before any of them
// generates again.
#pragma once

#include <ATen/ATen.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "model/engine.h"
#include "rollout/batch_queue.h"
#include "rollout/protocol.h"

namespace grpo::tok {
class Tokenizer;
}

namespace grpo::rollout {

// The devices of `count` replicas starting at `first`: consecutive GPUs
// (cuda:1 and 2 replicas: cuda:1, cuda:2), or the CPU `count` times. Throws
// naming --data_parallel_size when fewer GPUs are visible than it needs.
std::vector<at::Device> replica_devices(at::Device first, int64_t count, int visible_gpus);

// [begin, end) runs of `requests` requests over at most `parts` replicas:
// sizes differ by one at most, the larger first (TRL's split of a call's
// prompts over its data-parallel workers). Never an empty run.
std::vector<std::pair<size_t, size_t>> split_requests(size_t requests, size_t parts);

struct ReplicaStats {
  at::Device device = at::kCPU;
  BatchStats batches;
};

class Replicas {
 public:
  // Loads the model once per device; `num_threads` (0: every core) is shared
  // by replicas on the CPU.
  Replicas(const std::string& model_dir, at::ScalarType dtype, const std::vector<at::Device>& devices,
           const tok::Tokenizer* tokenizer, const model::EngineOptions& engine, std::chrono::microseconds batch_wait,
           int num_threads, int64_t max_sequences_in_flight);
  ~Replicas();
  Replicas(const Replicas&) = delete;
  Replicas& operator=(const Replicas&) = delete;

  size_t size() const { return replicas_.size(); }
  model::Engine& first() { return *replicas_.front().engine; }

  // BatchQueue::run over the replicas: completions in request order, copies
  // in index order. A call of fewer prompts than replicas goes to the next
  // replicas in turn, so small concurrent calls spread too. Throws as
  // BatchQueue::run does; when one replica's part fails the others' are
  // dropped and the failure is what the caller sees.
  std::vector<model::Completion> run(const GenerationJob& job, const std::function<bool()>& client_alive);

  // Runs fn on each replica's engine while none of them generates.
  void exclusive(const std::function<void(model::Engine&)>& fn);

  // Calls served and cancelled count HTTP calls; the rest adds the replicas' queues up.
  BatchStats stats() const;
  std::vector<ReplicaStats> each() const;

  void shut_down();

 private:
  struct Replica {
    at::Device device = at::kCPU;
    std::unique_ptr<model::Engine> engine;
    std::unique_ptr<BatchQueue> queue;
  };
  std::vector<Replica> replicas_;
  std::atomic<size_t> next_{0};  // the replica a call's first part goes to
  mutable std::mutex mutex_;     // guards calls_
  BatchStats calls_;             // jobs and cancelled, per HTTP call
};

}  // namespace grpo::rollout
