// Concurrent HTTP calls batched into the engine. Handlers hand their job to
// the queue and wait; one engine thread takes every job pending at that
// moment and runs those with the same sampling parameters as one engine call
// (the engine shares parameters across a call), so N clients asking at once
// cost about one batched decode instead of N sequential ones.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "model/engine.h"
#include "rollout/protocol.h"

namespace grpo::rollout {

struct BatchStats {
  uint64_t jobs = 0;          // HTTP calls served
  uint64_t engine_calls = 0;  // engine.generate() calls that served them
  uint64_t sequences = 0;     // completions generated
};

class BatchQueue {
 public:
  // batch_wait: how long the engine thread lingers after the first pending
  // job so that calls arriving together share a batch. num_threads: the
  // engine thread's torch threads (OpenMP's count is per calling thread, so
  // it is set again there; <= 0: every core).
  BatchQueue(model::Engine& engine, std::chrono::microseconds batch_wait, int num_threads);
  ~BatchQueue();  // stops the engine thread; waiting callers get an error
  BatchQueue(const BatchQueue&) = delete;
  BatchQueue& operator=(const BatchQueue&) = delete;

  // Completions of `job` in request order, copies in index order. Blocks;
  // rethrows what the engine threw for this job's batch.
  std::vector<model::Completion> run(const GenerationJob& job);

  // Runs fn while no batch is generating (weight updates), so a batch never
  // sees half-loaded weights.
  void exclusive(const std::function<void(model::Engine&)>& fn);

  BatchStats stats() const;
  void stop();

 private:
  struct Pending {
    const GenerationJob* job;
    std::promise<std::vector<model::Completion>> done;
  };
  void loop();
  void run_group(std::vector<Pending*>& group);

  model::Engine& engine_;
  std::chrono::microseconds batch_wait_;
  int num_threads_;
  mutable std::mutex mutex_;  // guards pending_, stopping_, stats_
  std::condition_variable wake_;
  std::vector<Pending*> pending_;
  bool stopping_ = false;
  BatchStats stats_;
  std::mutex model_mutex_;  // held while the engine generates or weights change
  std::thread thread_;
};

}  // namespace grpo::rollout
