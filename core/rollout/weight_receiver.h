// The server's side of weight transfer (rank 0 of the group). HTTP handlers
// must answer before the trainer broadcasts (the trainer waits for the
// answer first), so the receiving runs on a thread of its own, in the order
// the calls came. An update's failure is reported to the next call that waits
// for the thread: the next update, /reset_prefix_cache/ or
// /close_communicator/. A group that does not form is logged and named by the
// next update ("no communicator is open"), never by those other calls; at
// most one group waits to form after the one forming: a newer
// /init_communicator/ replaces it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rollout/comm_group.h"

namespace grpo::rollout {

// Copies received tensors into the model; called on the receiver's thread.
using ApplyWeights = std::function<void(const std::vector<TensorSpec>&, const std::vector<at::Tensor>&)>;

class WeightReceiver {
 public:
  // `listen_host`: the server's own address, where a store it hosts listens;
  // `device`: the model's, where an NCCL group receives.
  WeightReceiver(ApplyWeights apply, std::chrono::milliseconds timeout, std::string listen_host = "",
                 at::Device device = at::kCPU);
  ~WeightReceiver();
  WeightReceiver(const WeightReceiver&) = delete;
  WeightReceiver& operator=(const WeightReceiver&) = delete;

  // Queues joining the group at host:port as `rank` (rank 0 hosts its
  // store), its tensors over `backend`; returns at once (an earlier group is
  // closed first).
  void init(const std::string& host, int port, int world_size, int rank = 0, Backend backend = Backend::Gloo);

  // Waits for earlier work (rethrowing its failure), then queues receiving
  // `specs`: one tensor broadcast as itself, or (as_bucket) all of them as
  // one flat byte buffer. Throws TransferError when no group is open.
  void update(std::vector<TensorSpec> specs, bool as_bucket);

  // Waits until all queued work is done; throws the first failure since the
  // last call, as a TransferError naming the step and the parameter.
  void wait_idle();

  // Queues leaving the group.
  void close();

  bool connected() const { return connected_; }
  uint64_t tensors_received() const { return tensors_received_; }

 private:
  void enqueue(std::function<void()> work);
  void loop();

  ApplyWeights apply_;
  std::chrono::milliseconds timeout_;
  std::string listen_host_;
  at::Device device_;
  std::unique_ptr<CommGroup> group_;  // used on the thread only
  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> tensors_received_{0};

  std::mutex mutex_;  // guards the fields below
  std::condition_variable changed_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false, stopping_ = false;
  bool init_queued_ = false;  // a group is open or being formed
  uint64_t newest_init_ = 0;  // the /init_communicator/ call that counts; older queued ones are skipped
  std::optional<std::string> error_;
  std::string init_failure_;  // why the newest group did not form, for the next update's answer
  std::thread thread_;
};

}  // namespace grpo::rollout
