// Concurrent HTTP calls batched into the engine. Handlers hand their job to
// the queue and wait; one engine thread takes the jobs pending at that
// moment, up to a number of sequences, and runs those with the same sampling
// parameters as one engine call (the engine shares parameters across a
// call), so N clients asking at once cost about one batched decode instead
// of N sequential ones.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "model/engine.h"
#include "rollout/protocol.h"

namespace grpo::rollout {

struct BatchStats {
  uint64_t jobs = 0;          // HTTP calls served
  uint64_t engine_calls = 0;  // engine.generate() calls that served them
  uint64_t sequences = 0;     // completions generated
  uint64_t cancelled = 0;     // calls given up: their client went away, or the server stopped
  int64_t sequences_in_flight = 0;  // sequences of the calls the engine works on now
  int64_t calls_waiting = 0;        // calls waiting for room under the in-flight limit
};

// A call given up before its completions were ready.
class CallCancelled : public std::runtime_error {
 public:
  CallCancelled(bool shutting_down, const std::string& message)
      : std::runtime_error(message), shutting_down_(shutting_down) {}
  bool shutting_down() const { return shutting_down_; }  // else its client went away

 private:
  bool shutting_down_;
};

// The engine failed on the batch that held a call (out of memory, most
// often); what() is the cause's first line, without LibTorch's backtrace.
class EngineFailure : public std::runtime_error {
 public:
  EngineFailure(const std::string& cause, int64_t batch_sequences, size_t batch_calls)
      : std::runtime_error(cause), batch_sequences(batch_sequences), batch_calls(batch_calls) {}
  int64_t batch_sequences;  // the whole engine batch, this call's and others'
  size_t batch_calls;
};

// prompts × n: what a job costs the engine.
int64_t sequences_of(const GenerationJob& job);

class BatchQueue {
 public:
  // batch_wait: how long the engine thread lingers after the first pending
  // job so that calls arriving together share a batch. num_threads: the
  // engine thread's torch threads (OpenMP's count is per calling thread, so
  // it is set again there; <= 0: every core). max_sequences_in_flight: the
  // most sequences the engine takes on at once over every call; later calls
  // wait, in arrival order.
  BatchQueue(model::Engine& engine, std::chrono::microseconds batch_wait, int num_threads,
             int64_t max_sequences_in_flight);
  ~BatchQueue();  // stops the engine thread; waiting callers get CallCancelled
  BatchQueue(const BatchQueue&) = delete;
  BatchQueue& operator=(const BatchQueue&) = delete;

  // Completions of `job` in request order, copies in index order. Blocks,
  // asking client_alive() every 100 ms: once it says no, the job leaves the
  // queue, or its sequences leave the engine's batch before the next decode
  // step, and CallCancelled is thrown. Also throws CallCancelled once the
  // queue shuts down, and EngineFailure when the engine failed this job's batch.
  std::vector<model::Completion> run(const GenerationJob& job, const std::function<bool()>& client_alive);

  // Runs fn while no batch is generating (weight updates), so a batch never
  // sees half-loaded weights.
  void exclusive(const std::function<void(model::Engine&)>& fn);

  BatchStats stats() const;
  // Refuses new jobs and cancels every job waiting or running; returns at
  // once (their callers get CallCancelled). Safe from any thread.
  void shut_down();
  void stop();  // shut_down() and wait for the engine thread

 private:
  struct Pending {
    const GenerationJob* job = nullptr;
    int64_t sequences = 0;
    std::atomic<bool> cancelled{false};  // read by the engine between decode steps
    std::promise<std::vector<model::Completion>> done;
  };
  void loop();
  void run_group(std::vector<Pending*>& group);
  CallCancelled cancelled_error() const;

  model::Engine& engine_;
  std::chrono::microseconds batch_wait_;
  int num_threads_;
  int64_t max_in_flight_;
  mutable std::mutex mutex_;  // guards pending_, running_, stopping_, stats_
  std::condition_variable wake_;
  std::vector<Pending*> pending_;
  std::vector<Pending*> running_;  // taken by the engine thread, promise not yet set
  bool stopping_ = false;
  std::atomic<bool> shutting_down_{false};
  BatchStats stats_;
  std::mutex model_mutex_;  // held while the engine generates or weights change
  std::thread thread_;
};

}  // namespace grpo::rollout
