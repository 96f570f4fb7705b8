// What data parallel training adds to a step: the ranks' gradients combined
// before clipping (DDP's average, or ZeRO's sharding), the weights made equal
// again after it, and the step's metrics made global. With one process all
// of it is the identity.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/optim/adamw.h>

#include "dist/world.h"
#include "trainer/overlapped_all_reduce.h"

namespace grpo::trainer {

// Averages the gradients of `params` (those that require grad; a missing
// gradient counts as zeros) over the ranks, as DDP does, in float32 buckets
// of about `bucket_bytes`; returns the loss-carrying tokens of the step summed
// over the ranks (`local_active_tokens` each), which decides whether anyone
// has something to update.
int64_t average_gradients(dist::World& world, const std::vector<at::Tensor>& params, int64_t local_active_tokens,
                          int64_t bucket_bytes, const std::string& what);

// How the ranks' gradients and weights meet around each optimizer step.
// Stage 0 is DDP: every rank averages every gradient and steps every
// parameter. Stages 1 and 2 are DeepSpeed's ZeRO: each trained parameter is
// owned by one rank (contiguous ranges of about equal size) whose AdamW
// alone holds its moments, so the optimizer state per rank is about 1/N;
// stage 2 also sums each gradient on its owner only (a reduce, not an
// all-reduce) and frees it on the others. After the step the owners
// broadcast their parameters, so every rank holds the same full weights
// (sharding the weights themselves is stage 3, which is not built).
class ParameterSync {
 public:
  ParameterSync(dist::World& world, std::vector<at::Tensor> trained, int zero_stage, int64_t bucket_bytes);
  // Over several ranks only: a group of one (torchrun --nproc_per_node 1)
  // keeps its whole optimizer state, and its checkpoints resume as a plain run's.
  bool sharded() const { return stage_ > 0 && world_.size() > 1; }
  // The next backward is the step's last: where every rank holds every
  // gradient (stages 0 and 1), its buckets are all-reduced while it runs.
  void before_last_backward(const std::string& what);
  // The parameters this rank's optimizer steps: all, or the ones it owns.
  std::vector<at::Tensor> optimized() const;
  // The ranks' gradients combined; returns the step's loss-carrying tokens
  // over every rank, which decides whether anything is updated.
  int64_t combine_gradients(int64_t local_active_tokens, const std::string& what);
  // Clips the gradients over every rank as torch's clip_grad_norm_ does and
  // returns their total norm.
  double clip(double max_norm, const std::string& what);
  // After the optimizer step: the gradients of parameters this rank does not
  // own dropped, and every owner's new values broadcast to the others.
  void after_step(const std::string& what);

 private:
  dist::World& world_;
  std::vector<at::Tensor> trained_;
  std::vector<int> owner_;  // per trained parameter: the rank that steps it
  int stage_;
  int64_t bucket_bytes_;
  std::unique_ptr<OverlappedAllReduce> overlapped_;  // stages 0 and 1 over several ranks
};

// Bytes of the moments an AdamW holds (what ZeRO shards).
int64_t optimizer_state_bytes(const torch::optim::AdamW& optimizer);

// The step's metrics over every rank: the mean of each value over the ranks
// that reported it; the sum for failure counts (`*internal_errors`,
// `*handler_errors`); the least and the largest for `*_min` and `*_max`
// (clip_ratio/low_min, high_max: across ranks, as TRL reports them). `stop`: whether any rank was asked to stop.
std::map<std::string, double> global_metrics(dist::World& world, const std::map<std::string, double>& local,
                                             bool& stop, const std::string& what);

}  // namespace grpo::trainer
