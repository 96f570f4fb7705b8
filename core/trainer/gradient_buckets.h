// Gradients moved between ranks in buckets: runs of consecutive parameters
// flattened into one float32 buffer, and the buffer's sum put back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

namespace grpo::trainer {

using ParamRange = std::pair<size_t, size_t>;  // params[first, last)

// Runs of consecutive parameters with one owner, each at most `bytes` large
// (a single larger parameter is a run of its own), from the first parameter on.
std::vector<ParamRange> runs(const std::vector<at::Tensor>& params, const std::vector<int>& owner, int64_t bytes);

// The same with one owner, from the last parameter back: the order in which
// backward produces the gradients.
std::vector<ParamRange> runs_from_last(const std::vector<at::Tensor>& params, int64_t bytes);

// Gradients of params[a, b) as one float32 buffer (a missing one as zeros).
at::Tensor flat_gradients(const std::vector<at::Tensor>& params, ParamRange range);

// `flat` x `scale` back into the gradients of params[a, b).
void set_gradients(const std::vector<at::Tensor>& params, ParamRange range, const at::Tensor& flat, double scale);

}  // namespace grpo::trainer
