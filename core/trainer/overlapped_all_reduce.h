// DDP's overlap of the gradients' all-reduce with the backward pass. The
// trained parameters form buckets from the last one back, the order in which
// backward produces their gradients. A post hook on each parameter's
// gradient accumulator counts it final; once a bucket's gradients all are,
// its all-reduce starts on Gloo's thread while backward goes on with the
// layers before it. Collectives are matched by their order, so buckets start
// in the same order on every rank: a ready bucket waits for those before it.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "dist/world.h"
#include "trainer/gradient_buckets.h"

namespace torch::autograd {
struct Node;
}

namespace grpo::trainer {

class OverlappedAllReduce {
 public:
  OverlappedAllReduce(dist::World& world, std::vector<at::Tensor> trained, int64_t bucket_bytes);
  ~OverlappedAllReduce();  // removes its hooks
  OverlappedAllReduce(const OverlappedAllReduce&) = delete;
  OverlappedAllReduce& operator=(const OverlappedAllReduce&) = delete;

  // The next backward is the last before the update (the last micro-batch):
  // its gradients are final as it produces them. `what` names them in errors.
  void arm(const std::string& what);
  // After that backward (or without one): starts the buckets not started yet
  // (a gradient backward never produced counts as zeros), waits for all of
  // them, and leaves each gradient the ranks' average. Returns the step's
  // loss-carrying tokens summed over the ranks.
  int64_t finish(int64_t local_active_tokens, const std::string& what);

  // Buckets whose all-reduce started while backward ran, in the last finish().
  size_t overlapped() const { return overlapped_; }

 private:
  void reset(const std::string& what);
  void on_final(size_t param);
  void start_ready();
  void start(size_t bucket);

  dist::World& world_;
  std::vector<at::Tensor> trained_;
  std::vector<ParamRange> buckets_;  // in the order they start
  std::vector<size_t> bucket_of_;    // per parameter
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>> hooks_;

  std::mutex mu_;  // the hooks run on the autograd engine's thread
  bool armed_ = false;
  std::string what_;
  std::vector<bool> final_;        // per parameter, since arm()
  std::vector<size_t> pending_;    // per bucket: gradients not final yet
  std::vector<at::Tensor> flat_;   // per started bucket: its buffer being reduced
  size_t next_ = 0;                // the first bucket not started
  bool late_ = false;              // a gradient changed after its bucket started
  std::exception_ptr error_;       // a start that failed inside backward
  size_t overlapped_ = 0;
};

}  // namespace grpo::trainer
