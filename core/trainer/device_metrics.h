// Metrics computed where the step computes, read back once per step. Each
// read of a GPU tensor (item()) waits until the GPU has finished everything
// queued before it: read per micro-batch, the trainer would stall the device
// a dozen times over. A value is NaN where there is nothing to average (a
// micro-batch without an active token), and averages leave it out, as TRL's
// nanmean does.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace grpo::trainer {

// Named 0-dim tensors, NaN where there was nothing to average.
using MetricTensors = std::map<std::string, at::Tensor>;

// `values` read back in one transfer; NaN entries left out.
std::map<std::string, double> read_metrics(const MetricTensors& values);

// A step's metrics, added per micro-batch and read once.
class MetricAccumulator {
 public:
  void mean(const std::string& name, const at::Tensor& value);  // averaged over the values that are not NaN
  void mean(const MetricTensors& values);
  void sum(const std::string& name, const at::Tensor& value);
  // Every name's average or sum, in one transfer; a mean with no value that
  // is not NaN is left out. Empties the accumulator.
  std::map<std::string, double> read();

 private:
  std::map<std::string, std::vector<at::Tensor>> means_, sums_;
};

}  // namespace grpo::trainer
