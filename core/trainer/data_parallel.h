// What data parallel training adds to a step: the ranks' gradients summed
// and averaged in buckets before clipping, and the step's metrics made
// global. With one process both are the identity.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "dist/world.h"

namespace grpo::trainer {

// Averages the gradients of `params` (those that require grad; a missing
// gradient counts as zeros) over the ranks, as DDP does, in float32 buckets
// of about `bucket_bytes`; returns the loss-carrying tokens of the step summed
// over the ranks (`local_active_tokens` each), which decides whether anyone
// has something to update.
int64_t average_gradients(dist::World& world, const std::vector<at::Tensor>& params, int64_t local_active_tokens,
                          int64_t bucket_bytes, const std::string& what);

// The step's metrics over every rank: the mean of each value over the ranks
// that reported it, the sum for failure counts (`*internal_errors`,
// `*handler_errors`). `stop`: whether any rank was asked to stop.
std::map<std::string, double> global_metrics(dist::World& world, const std::map<std::string, double>& local,
                                             bool& stop, const std::string& what);

}  // namespace grpo::trainer
